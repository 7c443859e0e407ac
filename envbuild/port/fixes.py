"""The known fixes of a variant: every source's pinned tree opened in the mirror, the rows that
hold on the new stack read there (``envbuild.port.scan``), each hit a patch and each row a
deviation; a tree that could not be read leaves its rows undecided."""

from __future__ import annotations

import re
from pathlib import Path

from envbuild.draft.gitread import Tree
from envbuild.port import scan as sc
from envbuild.port.state import FIX_TEST, TEST, Port, open_tree


def launch_of(p: Port, component: str, tree: Tree) -> frozenset[str]:
    b = p.recipe.benchmark
    starts = [e.path for e in p.recipe.entry_scripts if e.component == component]
    base = ""
    if b is not None:
        cwd = b.cwd or ""
        m = re.match(r"^\{sources\.([a-z0-9._-]+)\}/?(.*)$", cwd)
        if m and m.group(1) == component:
            base = m.group(2)
            for cmd in [b.command, *b.variants.values()]:
                starts += sc.command_files(cmd, base)
        for cmd in [b.command, *b.variants.values()]:
            for m2 in re.finditer(r"\{sources\.([a-z0-9._-]+)\}/([\w./-]+)", cmd):
                if m2.group(1) == component:
                    starts.append(m2.group(2))
    return sc.launch_files(tree, starts, base)


def read_trees(p: Port) -> None:
    """Open every source's pinned tree in the mirror and record what could not be read."""
    for src in p.recipe.sources:
        if src.install == "apex":
            continue
        tree = open_tree(p, src.name, src.url, src.sha)
        if tree is not None:
            p.found.trees[src.name] = tree


def port_fixes(p: Port) -> None:
    """The known fixes each readable tree needs, as patches; the rows a tree that could not
    be read would have been checked against, as undecided."""
    rows = p.holding_fixes()
    launch = {name: launch_of(p, name, tree) for name, tree in p.found.trees.items()}
    carried: dict[tuple[str, str], list] = {}
    for q in p.data.get("patches", []):
        if q["kind"] in ("replace", "regex"):
            carried.setdefault((q["component"], q.get("file", "setup.py")), []).append(
                (q["kind"], q.get("old"), q.get("new"), q.get("count", 1)))
    ctx = sc.ScanContext(cc=p.stack.arch, launch=launch, carried=carried)
    for name, tree in p.found.trees.items():
        p.found.hits += sc.scan(tree, name, rows, ctx)
    names = [s["name"] for s in p.data.get("sources", [])]
    apex = {s["name"] for s in p.data.get("sources", []) if s.get("install") == "apex"}
    for component, why in p.found.unread.items():
        if component not in names or component in apex:  # Apex: chosen by the Apex rows, not scanned
            continue
        p.leave(f"sources[{names.index(component)}]",
                f"{component} could not be read ({why}), so the known fixes were not checked there: "
                f"{', '.join(f.id for f in rows) or 'none hold on this stack'}; give --git-mirror with it")
    _fix_patches(p)


def _slug(path: str) -> str:
    stem = Path(path).stem.lower().lstrip("_") or Path(path).parent.name
    return re.sub(r"[^a-z0-9]+", "-", stem).strip("-") or "file"


def _fix_patches(p: Port) -> None:
    patches = list(p.data.get("patches", []))
    ids = {q["id"] for q in patches}
    by_fix: dict[str, list[tuple[str, sc.Hit]]] = {}
    for hit in p.found.hits:
        pid = f"{hit.fix.id}-{_slug(hit.file)}"
        base, n = pid, 2
        while pid in ids:
            pid, n = f"{base}-{n}", n + 1
        ids.add(pid)
        tree = p.found.trees[hit.component]
        patch = {"id": pid, "kind": hit.kind, "component": hit.component, "file": hit.file,
                 "old": hit.old, "new": hit.new, "count": hit.count,
                 "why": f"{hit.fix.breaks} (envbuild port, fix {hit.fix.id}: {hit.count} at {hit.file}:{hit.line} "
                        f"at {tree.commit[:12]})",
                 "source": {"url": hit.fix.source}}
        patches.append(patch)
        by_fix.setdefault(hit.fix.id, []).append((pid, hit))
    if patches:
        p.data["patches"] = patches
    for fix_id, found in by_fix.items():
        fix = found[0][1].fix
        where = "; ".join(f"{h.component}@{p.found.trees[h.component].commit[:12]}:{h.file}:{h.line}" for _, h in found)
        p.deviate(fix_id, f"{where} (the pinned text: {found[0][1].old.strip()[:120]!r})", fix.breaks,
                  f"patch{'es' if len(found) > 1 else ''} {', '.join(pid for pid, _ in found)} (row {fix_id} of "
                  "envbuild/port/data/fixes.yaml), each tried on the pinned text by envbuild port",
                  fix.source, ["envbuild.node.textpatch:apply_text_patch", "envbuild.port.scan:scan"],
                  [f"{FIX_TEST}[{fix_id}]", TEST + "test_port_applies_fixes_only_where_the_pattern_is"])
