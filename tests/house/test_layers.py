"""The house's layers (docs/architecture.md, "Layers"), kept by import-linter's
contracts in pyproject.toml (``[tool.importlinter]``, run by ``lint-imports``).

The contract "layers" is the one list of layers, top first: cli -> flows (flows, provision,
verify) -> execute, launch, bundle, judge (report, observe, smoke) -> render -> actions
-> plan -> lock -> knowledge (compat, patches) -> facts -> connect -> data (recipes, targets) ->
base -> node. Its ``ignore_imports`` are the imports that still climb, each with why; "acyclic"
allows no cycle among the children of any package; forbidden, protected and independence
contracts keep the node side alone, the pure layers off the hosts and sibling modules apart.

Here: ``lint-imports`` keeps every contract, and each contract breaks when one import is added
to a copy of the package (mark lint); and what import-linter cannot see by itself: a folder of
modules without ``__init__.py`` (grimp skips it) and a module left out of every layer.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from support.paths import ROOT

PACKAGE = ROOT / "envbuild"
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
CONTRACTS = {c["id"]: c for c in CONFIG["contracts"]}
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

# the module the layers contract cannot place, and the contract that keeps it
UNPLACED = {"envbuild": "root-package"}


def layers() -> list[list[str]]:
    """The layers contract's layers, top first, as module names."""
    (container,) = CONTRACTS["layers"]["containers"]
    return [[f"{container}.{tail.strip()}" for tail in re.split(r"[:|]", layer)]
            for layer in CONTRACTS["layers"]["layers"]]


def layer_of(name: str, layering: list[list[str]]) -> int | None:
    return next((i for i, layer in enumerate(layering)
                 if any(name == m or name.startswith(m + ".") for m in layer)), None)


def modules() -> set[str]:
    out = set()
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        out.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def test_every_folder_of_modules_is_a_regular_package():
    """grimp, import-linter's graph, reads regular packages only: plan/ had no __init__.py, and
    none of its modules was seen by any contract."""
    folders = {p.parent for p in PACKAGE.rglob("*.py")}
    assert sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").exists()) == []


def test_every_module_lies_in_a_layer():
    """The layers contract is exhaustive over envbuild's children, launch included (its
    executor, launch.submit, lies with the renderers since the launch flow is
    envbuild.flows.launch). The root package no layer can hold is kept by a contract of its own."""
    layering = layers()
    assert CONTRACTS["layers"]["exhaustive"] is True
    assert "exhaustive_ignores" not in CONTRACTS["layers"]
    assert sorted(m for m in modules() - set(UNPLACED) if layer_of(m, layering) is None) == []
    assert layer_of("envbuild.launch.new_scheduler", layering) == layer_of("envbuild.launch.submit", layering)
    for module, contract in UNPLACED.items():
        assert layer_of(module, layering) is None
        assert CONTRACTS[contract]["source_modules"] == [module]
        assert CONTRACTS[contract]["as_packages"] is False


def test_the_flows_lie_in_the_layer_under_the_cli():
    """Every flow named in envbuild/flows/__init__.py lies in the layer right under the CLI."""
    layering = layers()
    text = (PACKAGE / "flows" / "__init__.py").read_text()
    rows = dict(re.findall(r"^([a-z-]+) +``(envbuild\.[a-z_.]+)\.[a-z_]+``\s", text, re.M))
    from envbuild.cli import COMMANDS  # the commands, as tests/cli/test_cli_interfaces.py keeps them

    assert set(rows) == set(COMMANDS)  # every command has its flow, and every row is a command
    assert all(m.startswith("envbuild.flows.") for m in rows.values()), rows
    assert {layer_of(m, layering) for m in rows.values()} == {layer_of("envbuild.cli", layering) + 1}


# what the CLI may import (the contract cli-thin forbids every other child of envbuild)
CLI_MAY_IMPORT = {"envbuild.cli", "envbuild.flows", "envbuild.record", "envbuild.display", "envbuild.errors",
                  "envbuild.interrupt"}


def test_the_cli_contract_forbids_every_other_layer():
    """Every child of envbuild but what the CLI may import is in cli-thin's list: a new package
    is forbidden to the CLI until it is placed, and only direct imports count (a flow imports
    the layers below on the CLI's behalf)."""
    contract = CONTRACTS["cli-thin"]
    assert contract["source_modules"] == ["envbuild.cli"] and contract["allow_indirect_imports"] is True
    children = {".".join(m.split(".")[:2]) for m in modules() if m != "envbuild"}
    assert set(contract["forbidden_modules"]) == children - CLI_MAY_IMPORT


def test_no_import_climbs_and_no_contract_lists_exceptions():
    """Issue 20's goal was at most 3 imports that climb; none does since images are planned in
    plan/. No contract ignores an import: one that climbs, or that makes two packages a cycle of
    siblings, fails lint-imports (test_lint_imports_keeps_every_contract)."""
    assert all("ignore_imports" not in c for c in CONTRACTS.values()), CONTRACTS


def module_cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(m: str) -> None:  # envbuild's graph is ~220 modules deep at most: recursion is fine
        index[m] = low[m] = len(index)
        stack.append(m)
        on.add(m)
        for t in imports.get(m, ()):
            if t not in index:
                visit(t)
                low[m] = min(low[m], low[t])
            elif t in on:
                low[m] = min(low[m], index[t])
        if low[m] == index[m]:
            part = []
            while True:
                t = stack.pop()
                on.discard(t)
                part.append(t)
                if t == m:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    for m in sorted(imports):
        if m not in index:
            visit(m)
    return out


def test_module_cycles_are_found():
    assert module_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert module_cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.lint
def test_no_module_imports_itself_round_a_cycle():
    """Issue 20: 0 import circles. Module by module, every import counted (in functions too):
    plan.container -> render.image -> plan.resolve -> plan.container was the last, until the
    image plan resolved through plan.node_plan and then moved into plan/ (plan.image)."""
    assert module_cycles(module_imports(ROOT)) == []


def module_imports(root: Path) -> dict[str, set[str]]:
    """{module: the envbuild modules it imports} of the package under ``root``, from grimp's
    graph, read in a process whose path starts there (a copy of the sources is read as itself)."""
    code = ("import json, grimp; g = grimp.build_graph('envbuild'); "
            "print(json.dumps({m: sorted(g.find_modules_directly_imported_by(m)) for m in g.modules}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(root)})
    return {m: set(ts) for m, ts in json.loads(out.stdout).items()}


@pytest.mark.lint
def test_the_old_circle_is_found_in_a_copy(copy_of_sources, tmp_path):
    """The image plan resolving through plan.resolve again closes plan.container ->
    plan.image -> plan.resolve -> plan.container: the check above finds it."""
    shutil.copytree(copy_of_sources, tmp_path, dirs_exist_ok=True)
    _append("plan/image.py", "from envbuild.plan.resolve import resolve  # noqa: F401\n")(tmp_path / "envbuild")
    cycles = module_cycles(module_imports(tmp_path))
    assert len(cycles) == 1 and {"envbuild.plan.container", "envbuild.plan.resolve",
                                 "envbuild.plan.image"} <= set(cycles[0]), cycles


def lint_imports(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    # COLUMNS: rich wraps a long contract name at 80 columns when not on a terminal
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo", *args], cwd=cwd,
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "300"})


@pytest.mark.lint
def test_lint_imports_keeps_every_contract():
    out = lint_imports(ROOT)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    for contract in CONTRACTS.values():
        assert re.search(rf"^{re.escape(contract['name'])} KEPT\b", text, re.M), (contract["id"], text)
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in text


def _append(rel: str, text: str):
    def edit(package: Path) -> None:
        path = package / rel
        path.write_text((path.read_text() if path.exists() else "") + text)
    return edit


def _drop(rel: str, line: str):
    def edit(package: Path) -> None:
        path = package / rel
        assert line in path.read_text()
        path.write_text(path.read_text().replace(line, ""))
    return edit


BREAKS = {
    "climbing import inside a function": (
        _append("facts/_case.py", "def f():\n    from envbuild.plan.model import Plan\n    return Plan\n"),
        "layers", "envbuild.facts._case -> envbuild.plan.model"),
    "relative climbing import": (
        _append("facts/_case.py", "from ..plan import model\n"),
        "layers", "envbuild.facts._case -> envbuild.plan.model"),
    "climbing import under TYPE_CHECKING": (
        _append("facts/_case.py", "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                                  "    from envbuild.plan.model import Plan\n"),
        "layers", "envbuild.facts._case -> envbuild.plan.model"),
    "an image planned by rendering it again": (
        _append("plan/container.py", "from envbuild.render import dockerfile  # noqa: F401\n"),
        "layers", "envbuild.plan.container -> envbuild.render.dockerfile"),
    "cycle within one layer": (  # compat imports patches (rules_apex); same layer, so layers keeps
        _append("patches/_case.py", "from envbuild.compat import rule\n"),
        "acyclic", "No cycles are allowed in envbuild."),
    "launch climbs to a flow": (
        _append("launch/__init__.py", "from envbuild.verify import verify\n"),
        "layers", "envbuild.launch -> envbuild.verify"),
    "the root package imports a module": (
        _append("__init__.py", "from envbuild import errors\n"),
        "root-package", "envbuild is not allowed to import envbuild.errors"),
    "the node side imports PyYAML": (
        _append("node/_case.py", "import yaml\n"),
        "node-alone", "envbuild.node is not allowed to import yaml"),
    "render reaches a host (down the layers)": (
        _append("render/_case.py", "from envbuild.connect import ssh\n"),
        "pure", "envbuild.render is not allowed to import envbuild.connect"),
    "fabric outside connect": (
        _append("facts/_case.py", "import fabric\n"),
        "connect-only", "envbuild.facts._case -> fabric"),
    "ansible_runner outside execute": (
        _append("provision/_case.py", "import ansible_runner\n"),
        "execute-only", "envbuild.provision._case -> ansible_runner"),
    "one scheduler imports another": (
        _append("launch/slurm.py", "from envbuild.launch import pbs\n"),
        "schedulers", "envbuild.launch.slurm is not allowed to import envbuild.launch.pbs"),
    "one fact probe imports another": (
        _append("facts/cuda.py", "from envbuild.facts import gpu\n"),
        "fact-probes", "envbuild.facts.cuda is not allowed to import envbuild.facts.gpu"),
    "the CLI composes a command itself": (
        _append("cli/_case.py", "def f():\n    from envbuild.recipes import load_recipe\n    return load_recipe\n"),
        "cli-thin", "envbuild.cli._case -> envbuild.recipes"),
}


def _sources_only(folder: str, names: list[str]) -> list[str]:
    return [n for n in names if n == "__pycache__"
            or (not n.endswith(".py") and not Path(folder, n).is_dir())]


@pytest.fixture(scope="module")
def copy_of_sources(tmp_path_factory) -> Path:
    """envbuild's sources and pyproject.toml, copied: lint-imports reads the copy (it puts its
    working folder first on sys.path), which keeps every contract as the tree does."""
    root = tmp_path_factory.mktemp("sources")
    shutil.copytree(PACKAGE, root / "envbuild", ignore=_sources_only)
    shutil.copy(ROOT / "pyproject.toml", root)
    out = lint_imports(root)
    assert out.returncode == 0 and f"Contracts: {len(CONTRACTS)} kept, 0 broken." in out.stdout, out.stdout + out.stderr
    return root


@pytest.mark.lint
@pytest.mark.parametrize("case", sorted(BREAKS))
def test_each_contract_breaks_on_the_import_it_forbids(case, copy_of_sources, tmp_path):
    """One import added to a copy of the sources breaks the contract that forbids it, and the
    report names the import."""
    edit, contract, reported = BREAKS[case]
    shutil.copytree(copy_of_sources, tmp_path, dirs_exist_ok=True)
    edit(tmp_path / "envbuild")
    out = lint_imports(tmp_path, "--contract", contract)
    text = out.stdout + out.stderr
    assert out.returncode != 0, text
    assert reported in text, text
