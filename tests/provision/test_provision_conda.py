"""The conda backend through the provision path, with a conda channel built by the test.

There is no conda, mamba or micromamba here and no conda-forge: the environment role falls back
to py-rattler, and the channel is a local folder holding one noarch package written by the test
(``envbuild-hello``: a shell tool and a data file) and indexed with ``rattler.index.index_fs``.
The channel carries no python, so the planner decides ``python_from: node``: the conda packages
go into the prefix, then a venv of the node's Python 3.11 is laid over the same prefix and
takes the pip packages.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from envbuild.provision import ProvisionOptions, provision

pytestmark = pytest.mark.integration

RECIPE = """\
schema: 1
name: conda-test
title: conda backend test recipe
description: a conda prefix with a local-channel package, plus a small pip package
published: {url: "https://example.invalid/conda-test"}
python: "3.11"
targets: [local]
environment: {kind: conda}
packages:
  - {name: six, version: "1.16.0", why: "small pure-Python package"}
import_check: [six]
"""

HELLO = b'#!/bin/sh\ncat "$(dirname "$0")/../share/envbuild-hello/hello.txt"\n'


def conda_package(path: Path, name: str, version: str, files: dict[str, bytes]) -> None:
    """A noarch (generic) conda package as .tar.bz2: info/index.json, paths.json, files."""
    index = {"name": name, "version": version, "build": "0", "build_number": 0, "noarch": "generic",
             "subdir": "noarch", "depends": [], "license": "MIT", "timestamp": int(time.time() * 1000)}
    paths = {"paths_version": 1, "paths": [
        {"_path": p, "path_type": "hardlink", "sha256": hashlib.sha256(b).hexdigest(),
         "size_in_bytes": len(b)} for p, b in files.items()]}
    members = {"info/index.json": json.dumps(index).encode(), "info/paths.json": json.dumps(paths).encode(),
               "info/files": ("\n".join(files) + "\n").encode(), **files}
    with tarfile.open(path, "w:bz2") as tf:
        for member, data in members.items():
            info = tarfile.TarInfo(member)
            info.size, info.mtime = len(data), int(time.time())
            info.mode = 0o755 if member.startswith("bin/") else 0o644
            tf.addfile(info, io.BytesIO(data))


@pytest.fixture(scope="module")
def channel(module_tmp) -> Path:
    from rattler.index import index_fs

    root = module_tmp("channel")
    (root / "noarch").mkdir()
    conda_package(root / "noarch" / "envbuild-hello-1.0-0.tar.bz2", "envbuild-hello", "1.0",
                  {"bin/envbuild-hello": HELLO, "share/envbuild-hello/hello.txt": b"hello from conda\n"})
    asyncio.run(index_fs(root))
    assert (root / "noarch" / "repodata.json").is_file()
    return root


def run(tmp_path, monkeypatch, channel: Path, specs: list[str]):
    monkeypatch.setenv("ENVBUILD_HOME", str(tmp_path / "home"))
    recipe = tmp_path / "conda-test.yaml"
    recipe.write_text(RECIPE)
    prefix = tmp_path / "env"
    out = provision(ProvisionOptions(target="local", recipe=str(recipe), backend="conda",
                                     prefix=str(prefix), smoke=False, conda_channel=str(channel),
                                     conda_packages=specs))
    return out, prefix


def test_conda_prefix_from_local_channel_with_node_python(tmp_path, monkeypatch, channel):
    started = time.time()
    out, prefix = run(tmp_path, monkeypatch, channel, ["envbuild-hello"])
    res = out.results["local"]
    assert out.exit_code == 5, (res["failed_step"], res["log_tail"][-3000:])  # no smoke: nothing judged (NOT JUDGED, exit 5)
    env = out.plans["local"].step("environment").params
    assert env.backend == "conda" and env.python_from == "node" and env.conda_specs == ["envbuild-hello"]

    record = json.loads((prefix / "conda-meta" / "envbuild-hello-1.0-0.json").read_text())
    assert record["name"] == "envbuild-hello" and record["version"] == "1.0"
    assert "envbuild-hello 1.0" in (prefix / ".envbuild" / "conda-packages.txt").read_text()
    hello = subprocess.run([str(prefix / "bin" / "envbuild-hello")], capture_output=True, text=True, check=True)
    assert hello.stdout == "hello from conda\n"

    probe = subprocess.run([str(prefix / "bin" / "python"), "-c",
                            "import sys, six; print(sys.prefix); print(six.__version__); print(six.__file__)"],
                           capture_output=True, text=True, check=True).stdout.split()
    assert probe[0] == str(prefix) and probe[1] == "1.16.0" and probe[2].startswith(str(prefix / "lib"))
    assert (prefix / "pyvenv.cfg").is_file()
    assert time.time() - started < 120


def test_python_asked_of_a_channel_without_it_fails_at_environment(tmp_path, monkeypatch, channel):
    out, prefix = run(tmp_path, monkeypatch, channel, ["python=3.11", "envbuild-hello"])
    res = out.results["local"]
    assert out.exit_code == 4 and res["failed_step"] == "environment"
    assert out.plans["local"].step("environment").params.python_from == "conda"
    assert "python" in res["log_tail"] and str(channel) in res["log_tail"]
    assert not (prefix / "bin" / "python").exists()
