"""A source whose pinned commit its repository's mirror does not hold (a branch deleted or
rewritten upstream) can be neither read, locked nor bundled. When
another source of the setup imports it at its pin and a later commit of that source (on its
ref's first-parent history) no longer does, the setup carried what it used or dropped it: the
variant moves that source to the first such commit (it still contains the published one:
``requires_ancestors``) and leaves the unreadable source out. A source whose compiled modules
the moved tree now builds itself (the same extension names in both setup.py files) goes too:
of two builds of one module name only one can be imported.

Read in the git mirror only (``git rev-list``, ``git grep``, ``git show``), never guessed: the
module is the source's name as Python spells it, and the rule fires only where the pinned tree
is seen to import it.

    port_unread_sources(p)   # opt-175b-azure: metaseq 5ca60055 -> 4de251ff, Megatron fa6c0860 left out
"""

from __future__ import annotations

import re

from envbuild import gitsrc
from envbuild.draft.gitread import Tree
from envbuild.errors import InputError
from envbuild.patches import apply_text_patch
from envbuild.port.scan import NOT_CODE
from envbuild.port.state import TEST, Port

#: an extension module a setup.py builds: CUDAExtension(name="amp_C", ...), CppExtension('x', ...)
EXTENSION = re.compile(r"\b(?:CUDA|Cpp)Extension\(\s*(?:name\s*=\s*)?[\"']([A-Za-z_][\w.]*)[\"']")


def module_of(name: str) -> str:
    """The import name a source's name stands for (``fused-kernels`` -> ``fused_kernels``)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def importers(tree: Tree, module: str) -> list[str]:
    """The code files (not tests/ or docs/) of ``tree`` that import ``module``: its
    ``import module``/``from module`` lines at any indentation (``git grep -E``)."""
    pattern = rf"^\s*(from|import)\s+{re.escape(module)}(\s|\.|,|$)"
    proc = gitsrc.run_git(["grep", "-l", "-I", "-E", "-e", pattern, tree.commit, "--", "*.py"],
                          cwd=tree.repo, check=False)
    files = [line.removeprefix(tree.commit + ":") for line in proc.stdout.splitlines() if line]
    return [f for f in files if not any(part in NOT_CODE for part in f.split("/")[:-1])]


def first_without(tree: Tree, ref: str, module: str) -> str | None:
    """The first commit after ``tree.commit`` on ``ref``'s first-parent history whose code
    imports no ``module``; None when every later commit still does (or ``ref`` is absent)."""
    try:
        head = gitsrc.resolve_ref(tree.repo, ref)
    except InputError:
        return None
    if not gitsrc.is_ancestor(tree.repo, tree.commit, head):
        return None
    later = gitsrc.run_git(["rev-list", "--first-parent", "--reverse", f"{tree.commit}..{head}"],
                           cwd=tree.repo).stdout.split()
    return next((c for c in later if not importers(Tree(tree.repo, c), module)), None)


def extensions(tree: Tree) -> set[str]:
    """The extension modules the tree's setup.py builds, by their full import names."""
    return set(EXTENSION.findall(tree.read("setup.py") or ""))


def port_unread_sources(p: Port) -> None:
    """See module. The candidates are sources whose repository is mirrored without their pinned
    commit (the published repository no longer has it); a repository missing from the mirror
    folder, or no mirror folder, is left to ``port_fixes`` (undecided: give the mirror)."""
    if p.mirror is None:
        return
    for src in list(p.recipe.sources):
        if src.name not in p.found.unread or src.install == "apex":
            continue
        if gitsrc.mirror_path(src.url, p.mirror) is None:  # not mirrored here at all: give it, not a move
            continue
        module = module_of(src.name)
        for dep in p.recipe.sources:
            tree = p.found.trees.get(dep.name)
            if tree is None or dep.name == src.name or not importers(tree, module):
                continue
            new = first_without(tree, dep.ref, module)
            if new is not None:
                _move(p, src.name, dep.name, tree, new, module)
                break


def _move(p: Port, gone: str, name: str, tree: Tree, new: str, module: str) -> None:
    srcs = p.data["sources"]
    src = next(s for s in srcs if s["name"] == name)
    old, lost = tree.commit, next(s for s in srcs if s["name"] == gone)
    moved = Tree(tree.repo, new)
    day, subject = gitsrc.commit_info(tree.repo, new)
    ahead = len(gitsrc.run_git(["rev-list", "--first-parent", f"{old}..{new}"], cwd=tree.repo).stdout.split())
    src["sha"] = new
    src["requires_ancestors"] = list(dict.fromkeys([*src.get("requires_ancestors", []), old]))
    src["why"] = (f"{str(src.get('why', '')).strip()} Moved by envbuild port from {old[:8]} to {new[:8]} ({day[:10]}, "
                  f"{subject!r}), the first commit of {src['ref']} after it whose code imports no `{module}`: "
                  f"{gone} {str(lost.get('sha'))[:12]} is in no mirror.").strip()
    src["source"] = {"url": f"{src['url']}/commit/{new}", "sha": new}
    p.found.trees[name] = moved
    left, unbuilt = [gone], set()
    built = extensions(moved)
    for other in srcs:
        if other["name"] in (name, gone):
            continue
        mirror = gitsrc.mirror_path(other["url"], p.mirror)
        sha = other.get("sha")
        if mirror is None or not sha or not gitsrc.has_commit(mirror, sha):
            continue
        theirs = extensions(Tree(mirror, gitsrc.resolve_ref(mirror, sha)))
        both = sorted(built & theirs)
        if both:
            left.append(other["name"])
            unbuilt |= theirs - built
            p.notes.append(f"{other['name']} left out: {name} {new[:8]} builds {', '.join(both)} itself")
    _leave_out(p, left, unbuilt)
    _carried_still_apply(p, name, moved)
    p.deviate(f"{name}-past-{gone}", f"{name} {old} with {gone} {lost.get('sha')} ({lost['url']})",
              f"{gone}: {p.found.unread.get(gone, 'not read')}, so it can be neither read, locked nor bundled",
              f"{name} {new} ({day[:10]}, {subject!r}), {ahead} commit(s) later on {src['ref']}: the first whose code "
              f"imports no `{module}` (it carries or dropped what it used); it contains {old[:12]} "
              f"(requires_ancestors). Left out: {', '.join(left)}"
              + (f" ({', '.join(left[1:])}: {name} {new[:8]} builds the same compiled modules itself)" if left[1:] else ""),
              f"{src['url']}/commit/{new}",
              ["envbuild.port.vendored:port_unread_sources", "envbuild.lock.gitpins:lock_from_mirror"],
              [TEST + "test_port_moves_past_a_source_no_mirror_holds"])
    for gone_name in left:
        p.found.unread.pop(gone_name, None)


def _leave_out(p: Port, names: list[str], unbuilt: set[str]) -> None:
    """Drop the sources ``names``, their patches, what waits for them and their modules (and
    ``unbuilt``: compiled modules only they built) from import_check."""
    gone = set(names)
    p.data["sources"] = [s for s in p.data["sources"] if s["name"] not in gone]
    for s in p.data["sources"]:
        if s.get("after"):
            s["after"] = [a for a in s["after"] if a not in gone]
    if p.data.get("patches"):
        p.data["patches"] = [q for q in p.data["patches"] if q["component"] not in gone]
    modules = {module_of(n) for n in gone} | unbuilt
    if p.data.get("import_check"):
        p.data["import_check"] = [m for m in p.data["import_check"] if m.split(".")[0] not in modules]


def _carried_still_apply(p: Port, name: str, tree: Tree) -> None:
    """The recipe's own text patches of the moved source must still apply at the new commit;
    one that does not is undecided (port never rewrites a patch it did not write)."""
    for i, q in enumerate(p.data.get("patches", [])):
        if q["component"] != name or q["kind"] not in ("replace", "regex"):
            continue
        text = tree.read(q.get("file", "setup.py"))
        status = "absent" if text is None else apply_text_patch(text, q["kind"], q.get("old"), q.get("new"),
                                                                 q.get("count", 1))[0]
        if status not in ("applied", "already-applied"):
            p.leave(f"patches[{i}]", f"patch {q['id']} of {name} is {status} at {tree.commit[:12]}, where the "
                    "variant moved it: rewrite it for that commit or drop it")
