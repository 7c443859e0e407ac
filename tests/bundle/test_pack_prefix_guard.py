"""A pack's manifest never chooses what a node deletes (issue 54, item 2): the node's unpack
step, run by sh as a node runs it, replaces the prefix only where it is absent, empty, or a
prefix envbuild made and marked (a ``.envbuild`` folder); a folder of someone's data, or a link
to one, is left as it is and the node fails naming it. The refusal of a pack made at another
prefix offers no option that would point the nodes at the manifest's path.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from envbuild.bundle import envpack
from envbuild.errors import InputError
from envbuild.facts.profile import from_target
from envbuild.launch import LaunchOptions
from envbuild.launch.job import build_job
from envbuild.launch.slurm import distribute
from envbuild.plan.build import PlanOptions
from envbuild.plan.resolve import resolve
from envbuild.recipes import load_recipe
from envbuild.targets import load_target


def _packed_at(tmp_path: Path, prefix: Path) -> envpack.PackedEnv:
    """A pack whose manifest names ``prefix``, made from an environment elsewhere, and the
    node's checked copy put where sbcast would have put it."""
    made = tmp_path / "made"
    (made / ".envbuild").mkdir(parents=True)
    (made / ".envbuild" / "env.sh").write_text("export X=from-the-pack\n")
    real = envpack.pack(made, tmp_path / "p.tar.gz")
    packed = envpack.PackedEnv(archive=real.archive, sha256=real.sha256, bytes=real.bytes, prefix=str(prefix))
    Path(packed.node_copy()).write_bytes((tmp_path / "p.tar.gz").read_bytes())
    return packed


def _node_runs(packed: envpack.PackedEnv, cwd: Path) -> subprocess.CompletedProcess:
    class Job:
        pass
    job = Job()
    job.packed, job.fanout = packed, 1
    script = shlex.split(distribute(job)[-1])[-1]  # srun ... sh -c SCRIPT
    return subprocess.run(["sh", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.mark.process
def test_a_data_folder_named_by_a_manifest_is_left_as_it_is(tmp_path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "corpus.bin").write_bytes(b"precious")
    packed = _packed_at(tmp_path, data)
    proc = _node_runs(packed, tmp_path)
    assert proc.returncode == 1, proc.stdout
    assert "holds files envbuild did not make" in proc.stderr and str(data) in proc.stderr
    assert (data / "corpus.bin").read_bytes() == b"precious" and not (data / ".envbuild").exists()
    assert not Path(packed.node_copy()).exists()  # the node's copy removed


@pytest.mark.process
def test_a_link_to_a_data_folder_is_not_replaced(tmp_path) -> None:
    data = tmp_path / "data"
    (data / ".envbuild").mkdir(parents=True)  # even one that looks marked, behind a link
    (data / "corpus.bin").write_bytes(b"precious")
    link = tmp_path / "env"
    link.symlink_to(data)
    proc = _node_runs(_packed_at(tmp_path, link), tmp_path)
    assert proc.returncode == 1
    assert link.is_symlink() and (data / "corpus.bin").read_bytes() == b"precious"


@pytest.mark.process
@pytest.mark.parametrize("before", ["absent", "empty", "envbuild's"])
def test_a_prefix_envbuild_made_or_none_is_replaced(tmp_path, before) -> None:
    prefix = tmp_path / "env"
    if before != "absent":
        prefix.mkdir()
    if before == "envbuild's":
        (prefix / ".envbuild" / "state").mkdir(parents=True)
        (prefix / "old-file").write_text("from an earlier provision")
    proc = _node_runs(_packed_at(tmp_path, prefix), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (prefix / ".envbuild" / "env.sh").read_text() == "export X=from-the-pack\n"
    assert not (prefix / "old-file").exists()


def test_the_refusal_of_another_prefix_offers_no_path_of_the_manifest(tmp_path) -> None:
    rec, tgt = load_recipe("alpa-megatron"), load_target("slurm")
    plan = resolve(rec, tgt, from_target(tgt), None, PlanOptions(prefix=str(tmp_path / "mine"), host="slurm")).plan
    theirs = str(tmp_path / "their-data")
    packed = envpack.PackedEnv(archive="/x.tar.gz", sha256="0" * 64, bytes=1, prefix=theirs)
    with pytest.raises(InputError) as err:
        build_job(rec, tgt, plan, LaunchOptions(scheduler="slurm", smoke_only=True, packed=packed))
    assert theirs in str(err.value)  # said, as data
    assert theirs not in (err.value.hint or "") and "--prefix " + theirs not in str(err.value)
