"""envbuild pack: a provisioned environment in one file with its manifest (envbuild.bundle.envpack)."""

from __future__ import annotations

import json
import tarfile

import pytest

from envbuild.bundle import envpack
from envbuild.cli import main
from envbuild.errors import InputError


def prefix_tree(root):
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").write_text("#!/bin/sh\n")
    (root / ".envbuild" / "state").mkdir(parents=True)
    (root / ".envbuild" / "env.sh").write_text("export X=1\n")
    (root / ".envbuild" / "state" / "environment.done").write_text("abc123\n")
    (root / ".envbuild" / "tmp" / "pip-build").mkdir(parents=True)
    (root / ".envbuild" / "tmp" / "pip-build" / "junk").write_text("x")
    (root / ".envbuild" / "prefix.lock").write_text("{}")
    return root


def test_pack_writes_the_file_and_its_manifest_and_leaves_out_tmp_and_the_lock(tmp_path, capsys):
    prefix = prefix_tree(tmp_path / "env")
    assert main(["pack", "--prefix", str(prefix), "-o", str(tmp_path / "env.tar.gz"), "--json"]) == 0
    man = json.loads(capsys.readouterr().out)
    assert man["prefix"] == str(prefix) and man["steps"] == {"environment": "abc123"}
    assert man == json.loads((tmp_path / "env.tar.gz.json").read_text()) | {"archive": man["archive"]}
    with tarfile.open(tmp_path / "env.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"bin/python", ".envbuild/env.sh", ".envbuild/state/environment.done"} <= names
    assert not any(n.startswith(".envbuild/tmp") or n == ".envbuild/prefix.lock" for n in names)
    assert envpack.read(tmp_path / "env.tar.gz").sha256 == man["sha256"]


def test_a_prefix_envbuild_did_not_make_is_refused_and_nothing_is_written(tmp_path, capsys):
    (tmp_path / "plain").mkdir()
    assert main(["pack", "--prefix", str(tmp_path / "plain"), "-o", str(tmp_path / "p.tar.gz")]) == InputError.exit_code
    assert "holds no environment envbuild made" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain"]


def test_a_pack_without_its_manifest_or_inside_its_prefix_is_refused(tmp_path):
    prefix = prefix_tree(tmp_path / "env")
    with pytest.raises(InputError, match="inside the prefix it packs"):
        envpack.pack(prefix, prefix / "self.tar.gz")
    envpack.pack(prefix, tmp_path / "a.tar.gz")
    (tmp_path / "a.tar.gz.json").unlink()
    with pytest.raises(InputError, match="no manifest beside the pack"):
        envpack.read(tmp_path / "a.tar.gz")
