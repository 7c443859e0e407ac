"""Install modes and build steps through ``envbuild provision --target local``.

Three tiny repositories made by the test, served from a git mirror laid out as OWNER/NAME.git:
``editpkg`` (install: editable), ``wheelpkg`` (install: wheel) and ``extpkg`` (a C extension
built by the recipe's ``build`` step, ``python setup.py build_ext --inplace``, then install: pth).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration

SETUP = "from setuptools import setup\nsetup(name={name!r}, version='0.1', py_modules=[{name!r}])\n"
EXT_SETUP = """\
from setuptools import Extension, setup
setup(name="extpkg", version="0.1", ext_modules=[Extension("extpkg", ["extpkg.c"])])
"""
EXT_C = """\
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *twice(PyObject *self, PyObject *args) {
    long n;
    if (!PyArg_ParseTuple(args, "l", &n)) return NULL;
    return PyLong_FromLong(2 * n);
}

static PyMethodDef methods[] = {{"twice", twice, METH_VARARGS, "2 * n"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "extpkg", NULL, -1, methods};
PyMODINIT_FUNC PyInit_extpkg(void) { return PyModule_Create(&module); }
"""


def git(*args, cwd):
    return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


def make_repo(base: Path, mirror: Path, name: str, files: dict[str, str]) -> str:
    work = base / "work" / name
    work.mkdir(parents=True)
    for rel, text in files.items():
        (work / rel).write_text(text)
    git("init", "-q", "-b", "main", cwd=work)
    git("add", ".", cwd=work)
    git("commit", "-qm", f"{name} 0.1", cwd=work)
    git("clone", "-q", "--bare", str(work), str(mirror / "acme" / f"{name}.git"), cwd=base)
    return git("rev-parse", "HEAD", cwd=work)


def test_editable_wheel_and_build_step(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "acme").mkdir(parents=True)
    shas = {
        "editpkg": make_repo(tmp_path, mirror, "editpkg", {
            "setup.py": SETUP.format(name="editpkg"), "editpkg.py": "WHERE = 'tree'\n"}),
        "wheelpkg": make_repo(tmp_path, mirror, "wheelpkg", {
            "setup.py": SETUP.format(name="wheelpkg"), "wheelpkg.py": "WHERE = 'tree'\n"}),
        "extpkg": make_repo(tmp_path, mirror, "extpkg", {"setup.py": EXT_SETUP, "extpkg.c": EXT_C}),
    }

    def src(name, install, **extra):
        return {"name": name, "url": f"https://github.com/acme/{name}", "ref": "main", "sha": shas[name],
                "install": install, "why": f"{install} mode under test", **extra}

    recipe = tmp_path / "modes.yaml"
    recipe.write_text(yaml.safe_dump({
        "schema": 1, "name": "modes-test", "title": "install modes", "description": "modes",
        "published": {"url": "https://example.invalid/modes"}, "python": "3.11", "targets": ["local"],
        "environment": {"kind": "venv"},
        "sources": [src("editpkg", "editable"), src("wheelpkg", "wheel"),
                    src("extpkg", "pth", build=["python setup.py build_ext --inplace"])],
        "import_check": ["editpkg", "wheelpkg", "extpkg"],
    }, sort_keys=False))
    prefix = tmp_path / "env"
    p = subprocess.run([sys.executable, "-m", "envbuild", "provision", "--target", "local", "--recipe",
                        str(recipe), "--git-mirror", str(mirror), "--prefix", str(prefix), "--no-smoke",
                        "--json"], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "ENVBUILD_HOME": str(tmp_path / "home")})
    lines = [json.loads(line) for line in p.stdout.splitlines()]  # JSON Lines: events, then the result
    assert lines and lines[-1].get("type") == "result", p.stdout[-2000:] + p.stderr[-2000:]
    out = lines[-1]
    res = out["results"]["local"]
    assert p.returncode == 5, (res["failed_step"], res["log_tail"][-3000:])  # no smoke: nothing judged (NOT JUDGED, exit 5)
    assert {"install:editpkg", "install:wheelpkg", "build:extpkg", "install:extpkg"} <= set(res["changed"])

    def py(code):
        return subprocess.run([str(prefix / "bin" / "python"), "-c", code], capture_output=True, text=True,
                              check=True).stdout.split()

    # the result line says how to enter the environment, and that shell has the installs
    assert out["enter"] == {"local": f". {prefix}/.envbuild/env.sh"}
    entered = subprocess.run(["bash", "-c", out["enter"]["local"] + " && python -c 'import sys, editpkg; print(sys.prefix)'"],
                             capture_output=True, text=True, env={k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"})
    assert entered.stdout.split() == [str(prefix)], entered.stderr
    site = py("import sysconfig; print(sysconfig.get_paths()['purelib'])")[0]
    src_dir = prefix / "src"
    edit_file, wheel_file = py("import editpkg, wheelpkg; print(editpkg.__file__); print(wheelpkg.__file__)")
    assert Path(edit_file).resolve() == (src_dir / "editpkg" / "editpkg.py").resolve()  # linked to the tree
    assert wheel_file == f"{site}/wheelpkg.py" and not Path(wheel_file).is_symlink()  # a copy
    assert not any("wheelpkg" in p.read_text() for p in Path(site).glob("*.pth"))

    (src_dir / "editpkg" / "editpkg.py").write_text("WHERE = 'edited'\n")
    (src_dir / "wheelpkg" / "wheelpkg.py").write_text("WHERE = 'edited'\n")
    assert py("import editpkg, wheelpkg; print(editpkg.WHERE, wheelpkg.WHERE)") == ["edited", "tree"]

    built = list((src_dir / "extpkg").glob("extpkg*.so"))
    assert len(built) == 1  # build_ext --inplace wrote it into the checkout
    assert py("import extpkg; print(extpkg.twice(21)); print(extpkg.__file__)") == ["42", str(built[0])]
