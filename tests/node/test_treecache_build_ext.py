"""A setuptools source built by opt-175b-azure-h100's metaseq build commands (``setup.py build_ext
--inplace``, then the objects removed), whose output is its ``build/`` folder: the next node's
checkout, with that folder restored, compiles nothing, in the build commands and in the editable
install's build_ext after them.

Real setuptools and torch's BuildExtension (metaseq's cmdclass) on this machine's compiler; a C++
module stands for metaseq's CUDA ones (no nvcc here), which build_ext skips by the same rule: a
module in build/lib newer than its sources is up to date. The editable install itself
(``setup.py develop``, setuptools < 80) runs that build_ext with the same folders; the GPU run
shows it on metaseq (docs/results)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envbuild.node import treecache
from envbuild.recipes import load_recipe

pytest.importorskip("torch.utils.cpp_extension")

SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(name="demo", version="0.1", py_modules=[],
      ext_modules=[CppExtension("demo_ext", sources=["csrc/demo.cpp"])],
      cmdclass={"build_ext": BuildExtension.with_options(use_ninja=False)})
"""
SOURCE = """\
#include <Python.h>
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "demo_ext", 0, -1, 0};
PyMODINIT_FUNC PyInit_demo_ext(void) { return PyModule_Create(&mod); }
"""


def _checkout(root: Path) -> Path:
    (root / "csrc").mkdir(parents=True)
    (root / "setup.py").write_text(SETUP)
    (root / "csrc" / "demo.cpp").write_text(SOURCE)
    return root


def _build(root: Path) -> str:
    """metaseq's build commands from the recipe, as the build step runs them (bash -ec in the tree,
    the environment's bin first on PATH: here this interpreter's, which has torch)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    out = ""
    for command in load_recipe("opt-175b-azure-h100").source("metaseq").build:
        done = subprocess.run(["bash", "-ec", command], cwd=root, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        out += done.stdout + done.stderr
    return out


def _module(root: Path) -> Path:
    found = sorted(root.glob("demo_ext*.so"))
    assert len(found) == 1, sorted(p.name for p in root.iterdir())
    return found[0]


def test_the_restored_build_folder_makes_the_next_checkouts_build_ext_compile_nothing(tmp_path):
    stash = str(tmp_path / "cache" / "tree-demo-key" / "outputs.tar")
    first = _checkout(tmp_path / "node1" / "demo")
    restored, said = treecache.restore(stash, str(first), ["build"])
    assert not restored and "none cached for this key" in said
    log = _build(first)
    assert "demo.cpp" in log  # the compiler ran
    said = treecache.save(stash, str(first), ["build"])
    assert "saved for the next node" in said, said
    built = _module(first).read_bytes()
    assert not list(first.glob("build/temp.*")) and list(first.glob("build/lib.*/demo_ext*.so"))

    time.sleep(0.05)  # the next node checks the tree out later than the build
    second = _checkout(tmp_path / "node2" / "demo")
    restored, said = treecache.restore(stash, str(second), ["build"])
    assert restored and "restored from the build cache" in said, said
    log = _build(second)
    assert "demo.cpp" not in log, log  # no compile: build_ext found the module up to date
    assert _module(second).read_bytes() == built  # copied into the tree from the restored build/lib
    said = treecache.save(stash, str(second), ["build"])
    assert "none of its" in said and "changed after the restore" in said, said

    # the editable install's build_ext runs after it, in the same folders: nothing again
    develop = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=second,
                             capture_output=True, text=True, timeout=300)
    assert develop.returncode == 0 and "demo.cpp" not in develop.stdout + develop.stderr, develop.stderr


def test_a_source_changed_after_the_restore_is_compiled_again(tmp_path):
    stash = str(tmp_path / "cache" / "tree-demo-key" / "outputs.tar")
    first = _checkout(tmp_path / "node1" / "demo")
    treecache.restore(stash, str(first), ["build"])
    _build(first)
    treecache.save(stash, str(first), ["build"])

    second = _checkout(tmp_path / "node2" / "demo")
    treecache.restore(stash, str(second), ["build"])
    source = second / "csrc" / "demo.cpp"
    source.write_text(SOURCE + "// changed on this node\n")
    log = _build(second)
    assert "demo.cpp" in log, log
    said = treecache.save(stash, str(second), ["build"])
    assert "changed after the restore" in said and "none of its" not in said, said
    shutil.rmtree(tmp_path / "cache")
