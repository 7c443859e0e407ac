"""The nccl probe, run by real sh, ldd and Python against compiled libraries.

A CUDA build of torch cannot be installed here (no GPU software); a stand-in package stands for
it: ``torch/lib/libtorch_cuda.so`` compiled by cc, linked to a compiled ``libnccl.so.2`` through
an RPATH as PyPI's torch is linked to the nvidia-nccl wheel, and a ``torch/__init__.py`` whose
``torch.cuda.nccl.version()`` says something else, so each test knows which path answered. The
real libraries were compared on an H200 node (docs/results/h200-run24.md): the probe's output
there is tests/data/facts/nccl-probe-h200-torchlib.txt.
"""

import os
import shlex
import shutil
import subprocess
import sys

from pathlib import Path

import pytest

from envbuild.connect.runners import LocalRunner
from envbuild.facts.nccl import PROBES, parse_nccl
from envbuild.facts.script import build_script, split_sections

NEEDS_CC = pytest.mark.skipif(not shutil.which("cc") or not shutil.which("ldd"), reason="needs cc and ldd")
H200 = Path(__file__).resolve().parents[1] / "data" / "facts" / "nccl-probe-h200-torchlib.txt"

IMPORTED = "import torch: ran\n"


def _cc(out, source, *args):
    src = out.parent / (out.name + ".c")
    src.write_text(source)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(out), str(src), *args], check=True)


def _torch(tmp_path, *, dynamic=True, rc=0, importable=True):
    """A site folder with the stand-in torch, and an interpreter that sees it."""
    site = tmp_path / "site"
    nccl = site / "nvidia" / "nccl" / "lib"
    lib = site / "torch" / "lib"
    nccl.mkdir(parents=True)
    lib.mkdir(parents=True)
    _cc(nccl / "libnccl.so.2", "int ncclGetVersion(int *v) { *v = 22809; return %d; }\n" % rc,
        "-Wl,-soname,libnccl.so.2")
    link = ["-L" + str(nccl), "-l:libnccl.so.2", "-Wl,-rpath,$ORIGIN/../../nvidia/nccl/lib"] if dynamic else []
    _cc(lib / "libtorch_cuda.so", "int torch_cuda_stub(void) { return 0; }\n", "-Wl,--no-as-needed", *link)
    (site / "torch" / "__init__.py").write_text(
        ("import os\nopen(os.environ['EB_MARK'], 'a').write(%r)\n" % IMPORTED
         + "class cuda:\n    class nccl:\n        version = staticmethod(lambda: (2, 18, 5))\n")
        if importable else "raise ImportError('no torch here')\n")
    py = tmp_path / "python"
    py.write_text(f"#!/bin/sh\nPYTHONPATH={shlex.quote(str(site))} exec {shlex.quote(sys.executable)} \"$@\"\n")
    py.chmod(0o755)
    return py, nccl / "libnccl.so.2"


def _probe(py, tmp_path):
    mark = tmp_path / "imported"
    script = build_script(PROBES, python=str(py))
    out = LocalRunner().run("EB_MARK=%s sh -c %s" % (shlex.quote(str(mark)), shlex.quote(script))).stdout
    return split_sections(out)["nccl"], mark.exists()


@NEEDS_CC
def test_a_dynamically_linked_torch_is_asked_through_its_library_without_importing_it(tmp_path):
    py, lib = _torch(tmp_path)
    sec, imported = _probe(py, tmp_path)
    assert sec.ok
    # the node's own nccl.h and libnccl files, if any, add header and lib lines: not torch's
    assert [ln for ln in sec.out.splitlines() if ln.startswith("torch")] == [f"torchlib 22809 {os.path.realpath(lib)}"]
    assert not imported and "torch (" not in sec.out
    assert parse_nccl(sec.out) == "2.28.9"


@NEEDS_CC
def test_nccl_linked_into_torch_imports_torch(tmp_path):
    py, _ = _torch(tmp_path, dynamic=False)
    sec, imported = _probe(py, tmp_path)
    assert imported and "torch (2, 18, 5)" in sec.out and "torchlib" not in sec.out
    assert parse_nccl(sec.out) == "2.18.5"


@NEEDS_CC
def test_a_library_that_does_not_answer_falls_back_to_importing_torch(tmp_path):
    py, _ = _torch(tmp_path, rc=5)
    sec, imported = _probe(py, tmp_path)
    assert imported and "torch (2, 18, 5)" in sec.out and "torchlib" not in sec.out


@NEEDS_CC
def test_a_library_the_loader_cannot_find_falls_back_to_importing_torch(tmp_path):
    py, lib = _torch(tmp_path)
    lib.unlink()  # ldd: "libnccl.so.2 => not found"
    sec, imported = _probe(py, tmp_path)
    assert imported and "torch (2, 18, 5)" in sec.out and "torchlib" not in sec.out


@NEEDS_CC
def test_a_torch_that_does_not_import_gives_no_torch_line(tmp_path):
    py, lib = _torch(tmp_path, importable=False)
    lib.unlink()
    sec, _ = _probe(py, tmp_path)
    assert not [ln for ln in sec.out.splitlines() if ln.startswith("torch")]


def test_parse_prefers_an_imported_torch_then_its_library_then_header_and_files():
    lib = "torchlib 22809 /site/nvidia/nccl/lib/libnccl.so.2\n"
    assert parse_nccl(lib + "lib /usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5\n") == "2.28.9"
    assert parse_nccl("torch (2, 18, 5)\n" + lib) == "2.18.5"
    assert parse_nccl("torchlib 21805 /a path/with spaces/libnccl.so.2\n") == "2.18.5"
    assert parse_nccl("torchlib x /p\nheader #define NCCL_MAJOR 2\nheader #define NCCL_MINOR 21\n"
                      "header #define NCCL_PATCH 5\n") == "2.21.5"


def test_the_h200_nodes_probe_gives_torchs_nccl_not_the_systems():
    # torch 2.11.0+cu130 there: `torch.cuda.nccl.version()` said (2, 28, 9); the system's
    # libnccl and nccl.h are 2.28.3
    assert parse_nccl(H200.read_text()) == "2.28.9"
