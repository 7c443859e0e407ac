"""envbuild pack: a provisioned environment in one file with its manifest (envbuild.bundle.envpack)."""

from __future__ import annotations

import json
import shutil
import subprocess
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
    assert man == json.loads((tmp_path / "env.tar.gz.json").read_text()) | {"archive": man["archive"],
                                                                           "provenance": None, "removed": []}
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


needs_squashfs = pytest.mark.skipif(not shutil.which("mksquashfs") or not shutil.which("unsquashfs"),
                                    reason="squashfs-tools is not installed (.ci/apt-packages.txt installs it)")


@needs_squashfs
def test_a_squashfs_pack_is_an_image_of_the_prefix_with_tmp_and_the_lock_left_out(tmp_path, capsys):
    """``.sqsh`` (or --format squashfs) makes a squashfs image with mksquashfs: unsquashfs lists
    the prefix's files, not its temporary folder or lock; the manifest says squashfs."""
    prefix = prefix_tree(tmp_path / "env")
    assert main(["pack", "--prefix", str(prefix), "-o", str(tmp_path / "env.sqsh"), "--json"]) == 0
    man = json.loads(capsys.readouterr().out)
    assert man["format"] == "squashfs" and man["steps"] == {"environment": "abc123"}
    assert (tmp_path / "env.sqsh").read_bytes()[:4] == b"hsqs"  # the squashfs superblock's magic
    listed = subprocess.run(["unsquashfs", "-l", "-d", "", str(tmp_path / "env.sqsh")], capture_output=True,
                            text=True, check=True).stdout.split()
    assert {"/bin/python", "/.envbuild/env.sh", "/.envbuild/state/environment.done"} <= set(listed)
    assert not any(n.startswith("/.envbuild/tmp") or n == "/.envbuild/prefix.lock" for n in listed)
    packed = envpack.read(tmp_path / "env.sqsh")
    assert packed.image and packed.node_copy() == f"{prefix}.pack-{packed.sha256[:16]}.sqsh"
    assert main(["pack", "--prefix", str(prefix), "-o", str(tmp_path / "named.img"), "--format", "squashfs"]) == 0
    assert envpack.read(tmp_path / "named.img").format == "squashfs"


def test_a_pack_name_that_says_the_other_format_is_refused_and_nothing_is_written(tmp_path, capsys):
    prefix = prefix_tree(tmp_path / "env")
    assert main(["pack", "--prefix", str(prefix), "-o", str(tmp_path / "env.sqsh"), "--format", "tar.gz"]) == 2
    assert "the name says squashfs, --format says tar.gz" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env"]
    assert envpack.pack(prefix, tmp_path / "env.tgz").format == "tar.gz"  # the default


def test_a_manifest_naming_another_format_is_refused(tmp_path):
    prefix = prefix_tree(tmp_path / "env")
    envpack.pack(prefix, tmp_path / "a.tar.gz")
    man = tmp_path / "a.tar.gz.json"
    man.write_text(json.dumps(json.loads(man.read_text()) | {"format": "zip"}))
    with pytest.raises(InputError, match="format 'zip', envbuild packs tar.zst, tar.gz, squashfs"):
        envpack.read(tmp_path / "a.tar.gz")


def test_without_mksquashfs_a_squashfs_pack_is_an_environment_problem_and_nothing_is_written(tmp_path, monkeypatch):
    from envbuild.errors import EnvironmentProblem

    prefix = prefix_tree(tmp_path / "env")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(EnvironmentProblem, match="mksquashfs is not installed"):
        envpack.pack(prefix, tmp_path / "env.sqsh")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env"]


def test_the_launch_and_the_node_smoke_name_the_same_shared_file_systems():
    """The node-side smoke cannot import envbuild: its lists are read from its source and must
    equal the launch's (a file system one calls shared, the other node-local, would disagree)."""
    import ast
    from pathlib import Path

    import envbuild.smoke
    from envbuild.launch import job

    tree = ast.parse((Path(envbuild.smoke.__file__).parent / "collective.py").read_text())
    found = {t.id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
             for t in node.targets if isinstance(t, ast.Name) and t.id in ("SHARED_FS", "NODE_IMAGE_FS")}
    assert found == {"SHARED_FS": job.SHARED_FS, "NODE_IMAGE_FS": job.NODE_IMAGE_FS}


def _key(path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "t", "-f", str(path)], check=True)
    return path


def test_a_signed_pack_is_trusted_only_as_signed_and_with_the_manifest_it_was_signed_with(tmp_path, capsys):
    """``pack --sign-key`` writes PACK.intoto.jsonl; ``envpack.trusted`` (``launch --packed
    --trusted-key``) accepts it with the maker's key, and refuses another key, a changed pack
    and a manifest that says another prefix than the signed one (a pack and its manifest
    replaced together no longer pass). An unsigned pack written over it removes the envelope."""
    from envbuild.errors import CheckFailed

    key = _key(tmp_path / "maker")
    _key(tmp_path / "other")  # another maker's key (other.pub), refused below
    prefix = prefix_tree(tmp_path / "env")
    out = tmp_path / "env.tar.gz"
    assert main(["pack", "--prefix", str(prefix), "-o", str(out), "--sign-key", str(key), "--json"]) == 0
    man = json.loads(capsys.readouterr().out)
    assert man["provenance"] == str(out) + ".intoto.jsonl"
    packed = envpack.trusted(out, [tmp_path / "maker.pub"])
    assert packed.sha256 == man["sha256"] and packed.prefix == str(prefix)
    assert main(["attest", str(out), "--trusted-key", str(tmp_path / "maker.pub"), "--kind", "pack"]) == 0
    capsys.readouterr()
    with pytest.raises(CheckFailed, match="not by a trusted key"):
        envpack.trusted(out, [tmp_path / "other.pub"])
    # the manifest rewritten to unpack elsewhere (its sha256 still the pack's): refused
    mpath = tmp_path / "env.tar.gz.json"
    original = mpath.read_text()
    mpath.write_text(json.dumps(json.loads(original) | {"prefix": "/elsewhere"}))
    with pytest.raises(CheckFailed, match="its prefix differ from the signed statement's"):
        envpack.trusted(out, [tmp_path / "maker.pub"])
    mpath.write_text(original)
    # the launch refuses it before anything is submitted (exit 1), and a key without a pack (exit 2)
    argv = ["launch", "alpa-megatron", "--target", "slurm", "--scheduler", "slurm", "--smoke-only",
            "--prefix", str(prefix), "--packed", str(out), "-o", str(tmp_path / "job.sbatch")]
    assert main([*argv, "--trusted-key", str(tmp_path / "other.pub")]) == 1
    assert "not by a trusted key" in capsys.readouterr().err and not (tmp_path / "job.sbatch").exists()
    assert main(["launch", "alpa-megatron", "--target", "slurm", "--scheduler", "slurm",
                 "--trusted-key", str(tmp_path / "maker.pub")]) == 2
    assert "--trusted-key checks the signature of a --packed pack" in capsys.readouterr().err
    # an unsigned pack written over it: the old envelope named the old bytes, and goes
    assert main(["pack", "--prefix", str(prefix), "-o", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["removed"] == [str(out) + ".intoto.jsonl"]
    assert not (tmp_path / "env.tar.gz.intoto.jsonl").exists()
