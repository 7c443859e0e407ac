"""The Slurm testbed itself: a real munge + slurmctld + 2 slurmd cluster in network namespaces."""

from __future__ import annotations

import subprocess

import pytest

from envbuild.testbed.slurm import parse_scontrol, slurm_cluster

pytestmark = pytest.mark.integration


def test_trivial_job_completes_and_its_output_is_read(slurm_cluster, tmp_path) -> None:
    out = tmp_path / "job-%j.out"
    script = tmp_path / "trivial.sbatch"
    script.write_text("#!/bin/bash\n"
                      f"#SBATCH --output={out}\n"
                      "#SBATCH --nodes=2 --gres=gpu:1\n"
                      "echo \"first $(hostname) gpus=$CUDA_VISIBLE_DEVICES nodes=$SLURM_JOB_NUM_NODES\"\n"
                      "timeout 30 srun --nodes=2 --ntasks-per-node=1 hostname | sort\n"
                      "getent hosts node2\n")
    job = slurm_cluster.sbatch(script, cwd=tmp_path)
    rec = slurm_cluster.wait(job, timeout=60)
    assert rec["JobState"] == "COMPLETED", rec
    assert rec["ExitCode"] == "0:0"
    text = (tmp_path / f"job-{job}.out").read_text()
    assert "first node1 gpus=0 nodes=2" in text
    assert "node1\nnode2\n" in text  # one task on each node, each in its own namespace
    assert "10.77.0.12" in text and "node2" in text  # nodes resolve each other by name


def test_failing_job_reports_state_and_exit_code(slurm_cluster, tmp_path) -> None:
    script = tmp_path / "fail.sbatch"
    script.write_text(f"#!/bin/bash\n#SBATCH --output={tmp_path}/fail-%j.out\necho about to fail\nexit 3\n")
    job = slurm_cluster.sbatch(script, cwd=tmp_path)
    rec = slurm_cluster.wait(job, timeout=60)
    assert rec["JobState"] == "FAILED" and rec["ExitCode"] == "3:0"
    assert (tmp_path / f"fail-{job}.out").read_text() == "about to fail\n"


def test_cluster_tears_down_everything() -> None:
    """A cluster of its own (one node, no GPU): after the context no process or namespace is left.

    Its folder is a short one under /tmp, not tmp_path: under an xdist worker tmp_path is deep
    enough that munged's socket path passes the 108 bytes of a Unix socket address (munged
    then exits 1)."""
    import shutil
    import tempfile

    base = tempfile.mkdtemp(prefix="ebslurm-")
    try:
        _tears_down(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _tears_down(base: str) -> None:
    with slurm_cluster(1, gpus_per_node=0, cpus_per_node=2, base_dir=base) as c:
        assert c.idle_nodes() == ["node1"]
        namespaces = list(c._namespaces)
        munge_socket = c.dir / "munge" / "munge.socket"
        assert munge_socket.exists()
    assert c.leftovers() == []
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    assert not set(namespaces) & set(listed)
    assert not c.dir.exists()


def test_parse_scontrol_keeps_values_with_spaces() -> None:
    rec = parse_scontrol("JobId=7 JobName=x y JobState=COMPLETED Reason=None ExitCode=0:0 "
                         "Command=/tmp/a b.sh StdOut=/tmp/o-7.out")
    assert rec["JobName"] == "x y" and rec["Command"] == "/tmp/a b.sh"
    assert rec["JobState"] == "COMPLETED" and rec["ExitCode"] == "0:0"
