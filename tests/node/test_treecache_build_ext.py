"""A setuptools source built by opt-175b-azure-h100's metaseq build commands (``setup.py build_ext
--inplace``, then the linked modules removed), whose output is its ``build/`` folder: the next
node's checkout, with that folder restored, compiles nothing, in the build commands and in the
editable install's build_ext after them; only the links run again.

Real setuptools, torch's BuildExtension (metaseq's cmdclass) and ninja on this machine's compiler;
a C++ module stands for metaseq's CUDA ones (no nvcc here). With ninja, BuildExtension forces
every extension through it (``force`` is true), so ninja alone decides what is compiled: the
objects in build/temp.* with its log and deps. ``setup.py develop`` (the editable install,
setuptools < 80) runs the same build_ext with the same folders and the same force; run 22 showed
that removing the objects made develop compile everything again on the GPU node."""

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
      cmdclass={"build_ext": BuildExtension})
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
    first = _checkout(tmp_path / "node" / "demo")
    restored, said = treecache.restore(stash, str(first), ["build"])
    assert not restored and "none cached for this key" in said
    log = _build(first)
    assert "demo.cpp" in log  # the compiler ran
    said = treecache.save(stash, str(first), ["build"])
    assert "saved for the next node" in said, said
    built = _module(first).read_bytes()
    assert list(first.glob("build/temp.*/.ninja_log")) and not list(first.glob("build/lib.*"))

    # the next node: the same path (part of the key: ninja's commands name it), checked out later
    shutil.rmtree(first)
    time.sleep(0.05)
    second = _checkout(first)
    restored, said = treecache.restore(stash, str(second), ["build"])
    assert restored and "restored from the build cache" in said, said
    log = _build(second)
    assert "demo.cpp" not in log and "demo.o" in log, log  # no compile: ninja found the object up to date; linked
    assert _module(second).stat().st_size == len(built)  # linked again from the restored object
    said = treecache.save(stash, str(second), ["build"])
    assert "none of its" in said and "changed after the restore" in said, said

    # the editable install's build_ext runs after it, in the same folders: nothing again
    develop = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=second,
                             capture_output=True, text=True, timeout=300)
    assert develop.returncode == 0 and "demo.cpp" not in develop.stdout + develop.stderr, develop.stderr


def test_a_source_changed_after_the_restore_is_compiled_again(tmp_path):
    stash = str(tmp_path / "cache" / "tree-demo-key" / "outputs.tar")
    first = _checkout(tmp_path / "node" / "demo")
    treecache.restore(stash, str(first), ["build"])
    _build(first)
    treecache.save(stash, str(first), ["build"])

    shutil.rmtree(first)
    second = _checkout(first)
    treecache.restore(stash, str(second), ["build"])
    source = second / "csrc" / "demo.cpp"
    source.write_text(SOURCE + "// changed on this node\n")
    log = _build(second)
    assert "demo.cpp" in log, log
    said = treecache.save(stash, str(second), ["build"])
    assert "changed after the restore" in said and "none of its" not in said, said
    shutil.rmtree(tmp_path / "cache")
