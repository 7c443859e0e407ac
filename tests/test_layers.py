"""The house's layers (docs/STYLE.md, "Where the house grew sideways"): every import of
envbuild's own code, at module top or inside a function, goes to the same layer or below, and
the packages' imports form no cycle. Read with ``ast`` from the source: nothing is imported.

Layers, top to bottom (a module belongs to the longest name that prefixes it):
cli -> flows (provision, verify, launch --submit) -> execute, launch, bundle, judge (report,
observe, smoke) -> render -> actions -> plan -> lock -> knowledge (compat, patches) -> facts ->
connect (how a node is reached) -> data (recipes, targets) -> base -> node (the node side, which
imports nothing of the controller).

``DEBT`` lists the imports that still climb, each with why; the test fails when one of them
goes (delete the line) and when a new one comes.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "envbuild"

LAYERS: list[tuple[str, ...]] = [  # top first
    ("envbuild.cli", "envbuild.__main__", "envbuild.testbed"),
    ("envbuild.provision", "envbuild.verify", "envbuild.launch.submit"),
    ("envbuild.execute", "envbuild.launch", "envbuild.bundle", "envbuild.report", "envbuild.observe",
     "envbuild.smoke", "envbuild.inputs"),
    ("envbuild.render",),
    ("envbuild.actions",),
    ("envbuild.plan",),
    ("envbuild.lock",),
    ("envbuild.compat", "envbuild.patches", "envbuild.scriptimports"),
    ("envbuild.facts",),
    ("envbuild.connect",),
    ("envbuild.recipes", "envbuild.targets", "envbuild.catalog"),
    ("envbuild", "envbuild.errors", "envbuild.shipped", "envbuild.fsio", "envbuild.names", "envbuild.rundir", "envbuild.userfile",
     "envbuild.yamlsrc", "envbuild.gitsrc", "envbuild.redact", "envbuild.interrupt", "envbuild.cuda_arch",
     "envbuild.versions"),
    ("envbuild.node",),  # the node side: standard library only (tests/test_node_package.py)
]

# importer -> imported: imports that still climb, and why (issue 20). Delete a line when it goes.
DEBT: dict[tuple[str, str], str] = {
    ("envbuild.plan.container", "envbuild.render"): "the image plan is made by rendering its context",
    ("envbuild.plan.container", "envbuild.render.dockerfile"):
        "an image is planned by rendering its Dockerfile context (images are not yet planned in plan/)",
    ("envbuild.plan.container", "envbuild.render.image"): "the image plan lives in render/image.py",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def own_imports(path: Path, name: str) -> set[str]:
    """The envbuild modules (or packages) ``path`` imports, anywhere in the file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "envbuild"}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            if base.split(".")[0] == "envbuild":
                out |= {f"{base}.{a.name}" for a in node.names} | {base}
    return out


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))
            if "ansible_collections" not in p.parts}


def resolve(name: str, known: set[str]) -> str | None:
    """The module ``name`` means (``from envbuild.x import y`` names y, a function or a module)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def layer_of(name: str) -> int:
    best = max((p for layer in LAYERS for p in layer if name == p or name.startswith(p + ".")), key=len)
    return next(i for i, layer in enumerate(LAYERS) if best in layer)


@lru_cache(maxsize=1)
def edges() -> frozenset[tuple[str, str]]:
    mods = modules()
    known = set(mods)
    return frozenset((m, t) for m, path in mods.items() for imp in own_imports(path, m)
                     if (t := resolve(imp, known)) and t != m)


def package_of(name: str) -> str:
    return ".".join(name.split(".")[:2])


def test_every_module_has_a_layer():
    """A new top-level module or package is placed in LAYERS, not taken for base by default."""
    unplaced = [m for m in modules() if m != "envbuild" and not any(
        m == p or m.startswith(p + ".") for layer in LAYERS for p in layer if p != "envbuild")]
    assert unplaced == []


def test_no_import_climbs_a_layer():
    climbing = {(m, t) for m, t in edges() if layer_of(t) < layer_of(m)}
    new = sorted(climbing - set(DEBT))
    gone = sorted(set(DEBT) - climbing)
    assert new == [], "imports that climb a layer (move the code, or the import, down):\n" + "\n".join(
        f"  {m} -> {t}" for m, t in new)
    assert gone == [], f"no longer climbing, delete from DEBT: {gone}"


def test_packages_import_no_cycle():
    graph: dict[str, set[str]] = defaultdict(set)
    for m, t in edges():
        if package_of(m) != package_of(t) and (m, t) not in DEBT:
            graph[package_of(m)].add(package_of(t))
    cycles = []
    for start in sorted(graph):
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    cycles.append(" -> ".join(path + [nxt]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
    assert cycles == []


def test_the_contract_sees_a_climbing_import(tmp_path):
    """The reader finds imports inside functions and relative ones, as the contract needs."""
    (tmp_path / "envbuild" / "facts").mkdir(parents=True)
    src = tmp_path / "envbuild" / "facts" / "probe.py"
    src.write_text("def f():\n    from envbuild.plan.model import Plan\n    from . import model\n    return Plan, model\n")
    assert own_imports(src, "envbuild.facts.probe") >= {"envbuild.plan.model.Plan", "envbuild.facts.model"}
    assert layer_of("envbuild.plan.model") < layer_of("envbuild.facts.probe")
