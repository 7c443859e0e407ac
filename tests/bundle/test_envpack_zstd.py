"""envbuild pack's default format, tar.zst (issue 52, item 2: packs at disk speed): the prefix's
tar compressed by zstd on every core, read by the node with ``tar -I zstd`` after the same sha256
check; a node without the zstd program fails before its prefix is touched; gzip packs (``.tar.gz``,
and manifests written before tar.zst, which had no format field) are still written and unpacked.
How fast: bench/pack_speed.py (never a timed test)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from envbuild.bundle import envpack
from envbuild.cli import main
from envbuild.launch.slurm import distribute

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def prefix_tree(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").write_text("#!/bin/sh\n")
    (root / "lib").mkdir()
    (root / "lib" / "big.bin").write_bytes(os.urandom(1 << 20) + bytes(3 << 20))  # past one zstd job
    (root / ".envbuild" / "state").mkdir(parents=True)
    (root / ".envbuild" / "env.sh").write_text("export X=1\n")
    (root / ".envbuild" / "state" / "environment.done").write_text("abc123\n")
    (root / ".envbuild" / "tmp").mkdir()
    (root / ".envbuild" / "tmp" / "junk").write_text("x")
    (root / ".envbuild" / "prefix.lock").write_text("{}")
    return root


def _node_runs(packed: envpack.PackedEnv, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """The node's distribute step (check, then unpack), run by sh as a node runs it, with the
    node's copy put where sbcast would have put it."""
    Path(packed.node_copy()).write_bytes(Path(packed.archive).read_bytes())

    class Job:
        pass
    job = Job()
    job.packed, job.fanout = packed, 1
    script = shlex.split(distribute(job)[-1])[-1]  # srun ... sh -c SCRIPT
    return subprocess.run(["sh", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=60, env=env)


def test_the_default_pack_is_a_zstd_tar_that_tar_and_zstd_read(tmp_path, capsys):
    """A name without .tar.gz or .sqsh makes a tar.zst: zstd's magic, one tar whose members GNU
    tar lists through the zstd program (the node's reader), the temporary folder and lock left
    out; its manifest says tar.zst and read() checks its sha256; the node's copy keeps .tar.zst."""
    prefix = prefix_tree(tmp_path / "env")
    out = tmp_path / "env.tar.zst"
    assert main(["pack", "--prefix", str(prefix), "-o", str(out), "--json"]) == 0
    man = json.loads(capsys.readouterr().out)
    assert man["format"] == "tar.zst" and man["steps"] == {"environment": "abc123"}
    assert out.read_bytes()[:4] == ZSTD_MAGIC
    listed = subprocess.run(["tar", "-I", "zstd", "-tf", str(out)], capture_output=True, text=True,
                            check=True).stdout.split()
    assert {"bin/python", "lib/big.bin", ".envbuild/env.sh", ".envbuild/state/environment.done"} <= set(listed)
    assert not any(n.startswith(".envbuild/tmp") or n == ".envbuild/prefix.lock" for n in listed)
    packed = envpack.read(out)
    assert packed.sha256 == man["sha256"] and packed.node_copy() == f"{prefix}.pack-{packed.sha256[:16]}.tar.zst"
    assert envpack.pack(prefix, tmp_path / "plain-name").format == "tar.zst"
    assert envpack.pack(prefix, tmp_path / "env.tgz").format == "tar.gz"


def test_a_name_that_says_another_tarball_than_the_format_is_refused(tmp_path, capsys):
    prefix = prefix_tree(tmp_path / "env")
    assert main(["pack", "--prefix", str(prefix), "-o", str(tmp_path / "env.tar.zst"), "--format", "tar.gz"]) == 2
    assert "the name says tar.zst, --format says tar.gz" in capsys.readouterr().err
    assert main(["pack", "--prefix", str(prefix), "-o", str(tmp_path / "env.tar.gz"), "--format", "tar.zst"]) == 2
    assert "the name says tar.gz, --format says tar.zst" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env"]


@pytest.mark.process
def test_the_node_checks_then_unpacks_a_zstd_pack_byte_for_byte(tmp_path):
    prefix = prefix_tree(tmp_path / "env")
    packed = envpack.pack(prefix, tmp_path / "p.tar.zst")
    want = {p.relative_to(prefix).as_posix(): p.read_bytes() for p in prefix.rglob("*") if p.is_file()}
    shutil.rmtree(prefix)
    proc = _node_runs(packed, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"checked the pack (sha256 {packed.sha256[:16]}) and unpacked it at {prefix}" in proc.stdout
    got = {p.relative_to(prefix).as_posix(): p.read_bytes() for p in prefix.rglob("*") if p.is_file()}
    assert got == {k: v for k, v in want.items() if not k.startswith(".envbuild/tmp") and k != ".envbuild/prefix.lock"}
    assert not Path(packed.node_copy()).exists()


@pytest.mark.process
def test_a_node_without_zstd_fails_naming_itself_before_its_prefix_is_touched(tmp_path):
    """Every tool the step uses but zstd, as on a node without the zstd program: exit 1 with
    the install hint, the envbuild prefix already there left whole, the copy removed."""
    prefix = prefix_tree(tmp_path / "env")
    packed = envpack.pack(prefix, tmp_path / "p.tar.zst")
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("sh", "stat", "sha256sum", "rm", "mkdir", "tar", "hostname", "ls", "cp", "gzip"):
        (tools / name).symlink_to(shutil.which(name))
    proc = _node_runs(packed, tmp_path, env={"PATH": str(tools)})
    assert proc.returncode == 1, proc.stdout
    assert "no zstd to unpack the pack (install zstd, or pack a .tar.gz)" in proc.stderr
    assert (prefix / "lib" / "big.bin").is_file() and (prefix / ".envbuild" / "env.sh").is_file()
    assert not Path(packed.node_copy()).exists()


@pytest.mark.process
def test_a_gzip_pack_whose_manifest_predates_tar_zst_is_still_read_and_unpacked(tmp_path):
    """A manifest of before (no ``format``: every tarball was gzip) reads as tar.gz, and the
    node unpacks it with tar -xz, with no zstd on its PATH."""
    prefix = prefix_tree(tmp_path / "env")
    envpack.pack(prefix, tmp_path / "old.tar.gz")
    man = tmp_path / "old.tar.gz.json"
    man.write_text(json.dumps({k: v for k, v in json.loads(man.read_text()).items() if k != "format"}))
    packed = envpack.read(tmp_path / "old.tar.gz")
    assert packed.format == "tar.gz" and packed.node_copy().endswith(".tar.gz")
    shutil.rmtree(prefix)
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("sh", "stat", "sha256sum", "rm", "mkdir", "tar", "hostname", "ls", "cp", "gzip"):
        (tools / name).symlink_to(shutil.which(name))
    proc = _node_runs(packed, tmp_path, env={"PATH": str(tools)})
    assert proc.returncode == 0, proc.stderr
    assert (prefix / "lib" / "big.bin").read_bytes()[(1 << 20):] == bytes(3 << 20)
