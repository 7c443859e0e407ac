"""envbuild's node package (envbuild/node/) keeps to what a node offers: every file compiles and
imports under the package's floor (``envbuild.node.PYTHON_FLOOR``), run by that very
interpreter; every import is of that interpreter's standard library or of a sibling, relative;
a file run as a script imports no sibling (it is copied alone), but for the node tool
(``__main__.py``), copied with every file its actions import and run as their folder; the floor
is the oldest Python a shipped target or recipe names; Ansible's module_utils carry the package,
file for file.

The floor's interpreter is found by tests/support/nodefloor.py (pyenv or $PATH); without it the checks
that need it skip, saying so.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from envbuild.actions.nodestate import NODE, node_package
from envbuild.node import PYTHON_FLOOR
from envbuild.render.shell import NODE_TOOL, NODE_TOOL_FILES
from envbuild.shipped import PLAYBOOKS
from envbuild.recipes import all_recipes
from envbuild.targets import DATA as TARGETS, load_target
from support.nodefloor import FLOOR, floor_python

FILES = sorted(NODE.glob("*.py"))
MODULE_UTILS = (PLAYBOOKS / "ansible_collections" / "envbuild" / "node" / "plugins"
                / "module_utils" / "envbuild_node")
# imports outside the standard library, file by file, and why
NOT_STDLIB = {"rattler_create.py": {"rattler": "py-rattler creates the conda prefix; the file says so when it "
                                               "cannot import it (envbuild's 'conda' extra)"}}
THROUGH_BOOT_ONLY = {"probe.py", "task.py"}  # run only as ``python -m`` would (boot.py): they may import siblings

# Run by the floor's interpreter with -I -S (no site-packages, no user paths): which of the
# names are its standard library, then each file of the package (copied as envbuild_node/ into
# argv[1]) compiled and imported.
CHECK = r"""
import importlib, importlib.util, json, os, sys, sysconfig
root, names = sys.argv[1], json.loads(sys.argv[2])
out = {"version": "%d.%d" % sys.version_info[:2], "stdlib": {}, "compile": {}, "import": {}}
known = getattr(sys, "stdlib_module_names", None)
homes = set(os.path.realpath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib"))
for name in names:
    if known is not None or name in sys.builtin_module_names:
        out["stdlib"][name] = name in (known or sys.builtin_module_names)
        continue
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    where = spec and (spec.origin if spec.origin not in (None, "namespace") else
                      list(spec.submodule_search_locations or [None])[0])
    out["stdlib"][name] = bool(spec) and (where in ("built-in", "frozen") or (
        bool(where) and "site-packages" not in where
        and any(os.path.realpath(where).startswith(h + os.sep) for h in homes)))
sys.path.insert(0, root)
for name in sorted(os.listdir(os.path.join(root, "envbuild_node"))):
    if not name.endswith(".py"):
        continue
    path = os.path.join(root, "envbuild_node", name)
    try:
        with open(path, "rb") as fh:
            compile(fh.read(), path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        out["compile"][name] = "%s (line %s)" % (exc.msg, exc.lineno)
        continue
    out["compile"][name] = None
    try:
        importlib.import_module("envbuild_node" + ("" if name == "__init__.py" else "." + name[:-3]))
        out["import"][name] = None
    except BaseException as exc:
        out["import"][name] = "%s: %s" % (type(exc).__name__, exc)
print(json.dumps(out))
"""


def imports(path: Path) -> tuple[set[str], set[str], list[str]]:
    """(top-level names imported absolutely, siblings imported relatively, problems) of one file,
    imports inside functions and try blocks included."""
    siblings = {p.stem for p in path.parent.glob("*.py")} - {"__init__"}
    absolute, relative, problems = set(), set(), []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            absolute |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            absolute.add((node.module or "").split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            named = [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
            if node.level != 1 or not set(named) <= siblings:
                problems.append(f"line {node.lineno}: {'.' * node.level}{node.module or ''} "
                                f"{[a.name for a in node.names]} is not a sibling of the package")
            relative |= set(named)
    return absolute, relative, problems


def floor_check(package: Path, names: set[str], python: str) -> dict:
    """CHECK's answer for ``package`` (a folder of .py files) and ``names``, by ``python``."""
    with tempfile.TemporaryDirectory() as root:
        shutil.copytree(package, Path(root) / "envbuild_node", ignore=shutil.ignore_patterns("__pycache__"))
        p = subprocess.run([python, "-I", "-S", "-B", "-c", CHECK, root, json.dumps(sorted(names))],
                           capture_output=True, text=True, timeout=300, cwd=root)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


def violations(package: Path, python: str) -> list[str]:
    """Everything the floor's interpreter and the import rules find wrong in ``package``."""
    found, names = [], set()
    for path in sorted(package.glob("*.py")):
        absolute, relative, problems = imports(path)
        found += [f"{path.name}: {p}" for p in problems]
        names |= absolute - set(NOT_STDLIB.get(path.name, {}))
        text = path.read_text()
        if relative and "__name__ == \"__main__\"" in text and path.name not in THROUGH_BOOT_ONLY:
            found.append(f"{path.name}: runs as a script (copied alone) but imports {sorted(relative)}")
    answer = floor_check(package, names, python)
    found += [f"{n}: not in Python {answer['version']}'s standard library"
              for n, ok in sorted(answer["stdlib"].items()) if not ok]
    found += [f"{f}: does not compile under Python {answer['version']}: {e}"
              for f, e in sorted(answer["compile"].items()) if e]
    found += [f"{f}: does not import under Python {answer['version']}: {e}"
              for f, e in sorted(answer["import"].items()) if e]
    return found


@pytest.fixture(scope="module")
def python() -> str:
    found = floor_python()
    if found is None:
        pytest.skip(f"no Python {FLOOR} (the node package's floor) on this machine: pyenv install {FLOOR}")
    return found


def test_every_file_compiles_imports_and_needs_only_the_floors_standard_library(python):
    assert {"__init__.py", "actions.py", "effects.py", "state.py", "textpatch.py", "boot.py"} <= {p.name for p in FILES}
    assert violations(NODE, python) == []


def test_the_checks_see_newer_syntax_a_foreign_import_and_a_climbing_one(python, tmp_path):
    """The contract is kept by checks that do fail: a planted file shows each of them failing."""
    shutil.copytree(NODE, tmp_path / "node", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "node" / "planted.py").write_text(
        "import yaml\nfrom envbuild import errors\nfrom ..x import y\n\n"
        "def f(v):\n    match v:\n        case 1:\n            return yaml, errors, y\n")
    (tmp_path / "node" / "later.py").write_text("import functools\n\n\n@functools.cache\ndef f():\n    return 1\n")
    (tmp_path / "node" / "alone.py").write_text(
        "from . import textpatch\n\nif __name__ == \"__main__\":\n    print(textpatch.KINDS)\n")
    found = "\n".join(violations(tmp_path / "node", python))
    assert f"yaml: not in Python {FLOOR}'s standard library" in found
    assert f"envbuild: not in Python {FLOOR}'s standard library" in found
    assert "planted.py: line 3: ..x ['y'] is not a sibling" in found
    assert f"planted.py: does not compile under Python {FLOOR}" in found
    assert f"later.py: does not import under Python {FLOOR}: AttributeError" in found  # functools.cache: 3.9
    assert "alone.py: runs as a script (copied alone) but imports ['textpatch']" in found


def test_the_floor_is_the_oldest_python_a_shipped_target_or_recipe_names():
    def version(text: str) -> tuple[int, ...]:
        return tuple(int(n) for n in text.split(".")[:2])

    named = {f"target {t.stem}": version(v) for t in sorted(TARGETS.glob("*.yaml"))
             for v in load_target(t.stem).python}
    named |= {f"recipe {r.name} {r.python}": version(r.python) for r in all_recipes()}
    oldest = min(named.values())
    assert oldest == PYTHON_FLOOR, (f"the oldest Python a shipped target or recipe names is {oldest} "
                                    f"({[k for k, v in named.items() if v == oldest]}): PYTHON_FLOOR in "
                                    f"envbuild/node/__init__.py says {PYTHON_FLOOR}")


def test_ansible_module_utils_link_every_file_of_the_package():
    """The collection's module_utils/envbuild_node/ is the package itself: one link per file."""
    entries = sorted(p.name for p in MODULE_UTILS.iterdir() if p.name != "__pycache__")
    assert entries == [p.name for p in FILES]
    for name in entries:
        link = MODULE_UTILS / name
        assert link.is_symlink() and not os.path.isabs(os.readlink(link)), name
        assert link.resolve() == (NODE / name).resolve(), name


def test_boot_refuses_a_python_below_the_packages_floor(tmp_path):
    """boot.py reads the floor from the package it is given, before anything else compiles."""
    import base64
    import zlib

    files = dict(json.loads(zlib.decompress(base64.b64decode(node_package()))))
    files["__init__"] = files["__init__"].replace(f"PYTHON_FLOOR = {PYTHON_FLOOR!r}", "PYTHON_FLOOR = (99, 0)")
    assert "(99, 0)" in files["__init__"]
    package = base64.b64encode(zlib.compress(json.dumps(sorted(files.items())).encode())).decode()
    p = subprocess.run([sys.executable, "-E", "-c", (NODE / "boot.py").read_text(), package, "probe", "e30="],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.strip() == (f"envbuild's node code needs Python 99.0 or newer; {sys.executable} is Python "
                                f"{sys.version.split()[0]}")


def test_the_node_tool_carries_every_file_its_actions_import():
    """run.sh and images carry ``envbuild_node/`` as NODE_TOOL_FILES: the package's ``__init__``,
    the tool, and ``actions`` with what it imports, transitively."""
    want, todo = {"__init__.py", "__main__.py"}, ["actions"]
    while todo:
        name = todo.pop() + ".py"
        if name not in want:
            want.add(name)
            todo += sorted(imports(NODE / name)[1])
    assert set(NODE_TOOL_FILES) == want
    assert imports(NODE / "__main__.py")[1] == set()  # run as a folder: it loads its siblings itself


def test_the_node_tool_runs_as_its_copied_folder_under_the_floor(python, tmp_path):
    folder = tmp_path / "files" / NODE_TOOL
    folder.mkdir(parents=True)
    for name in NODE_TOOL_FILES:
        shutil.copy(NODE / name, folder / name)
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "setup.py").write_text("CHECK = True\n")
    spec = {"id": "p", "kind": "replace", "file": "setup.py", "old": "CHECK = True", "new": "CHECK = False"}
    action = tmp_path / "files" / "actions" / "patch-p.json"
    action.parent.mkdir()
    action.write_text(json.dumps({"op": "patch", "spec": spec, "dest": str(tmp_path / "tree"),
                                  "diff_dir": str(tmp_path / "diffs")}))
    p = subprocess.run([python, str(folder), str(action)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert (p.returncode, p.stdout, p.stderr) == (0, "patch p: applied\n", "")
    assert (tmp_path / "tree" / "setup.py").read_text() == "CHECK = False\n"
    (tmp_path / "tree" / "setup.py").write_text("other\n")
    p = subprocess.run([python, str(folder), str(action)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and p.stderr.startswith("patch p on setup.py: failed")
    p = subprocess.run([python, str(folder), str(tmp_path / "tree" / "setup.py")], capture_output=True, text=True)
    assert p.returncode == 2 and "cannot read" in p.stderr
    init = folder / "__init__.py"
    init.write_text(init.read_text().replace(f"PYTHON_FLOOR = {PYTHON_FLOOR!r}", "PYTHON_FLOOR = (99, 0)"))
    p = subprocess.run([python, str(folder), str(action)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and p.stderr.startswith("envbuild's node code needs Python 99.0 or newer")
