"""The Slurm test bed started and stopped outside pytest (issue 53), as docs/testing.md says a
site does to try its templates: ``python -m envbuild.testbed.slurm up`` leaves a cluster
running after the command exits, ``env`` prints what clients need, a job runs on it, ``down``
stops every daemon and deletes the namespaces and the folder. Real processes throughout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def bed(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envbuild.testbed.slurm", *argv], capture_output=True, text=True,
                          timeout=180, env=env or dict(os.environ))


def test_up_env_a_job_then_down_leaves_nothing(tmp_path) -> None:
    import tempfile

    # a short folder: slurmstepd's socket path under it must stay within 108 bytes (AF_UNIX)
    state = Path(tempfile.mkdtemp(prefix="eb-tb-", dir="/tmp"))
    up = bed("up", "--nodes", "1", "--gpus-per-node", "1", "--cpus-per-node", "2", "--dir", str(state))
    assert up.returncode == 0, up.stderr
    folder = Path((state / "current").read_text().strip())
    saved = json.loads((folder / "cluster.json").read_text())
    try:
        assert bed("up", "--dir", str(state)).returncode == 1  # one cluster a folder
        exports = bed("env", "--dir", str(state)).stdout
        out = tmp_path / "out.txt"
        script = (exports + f"id=$(sbatch --parsable -o {out} --wrap hostname)\n"
                  'for _ in $(seq 600); do scontrol show job -o "$id" | grep -q "JobState=COMPLETED" && break; '
                  f"sleep 0.1; done\nscontrol show job -o \"$id\" >&2; cat {out}")
        job = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        logs = "".join(f.read_text()[-1500:] for f in sorted((folder / "log").glob("*.log")))
        assert job.returncode == 0 and job.stdout.split()[-1] == "node1", job.stdout + job.stderr + logs
    finally:
        down = bed("down", "--dir", str(state))
    assert down.returncode == 0, down.stderr
    assert not folder.exists() and not (state / "current").exists()
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    assert not set(saved["namespaces"]) & set(names)
    assert not [pid for pid in saved["pids"] if Path(f"/proc/{pid}").exists()
                and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
    assert bed("down", "--dir", str(state)).returncode == 1  # nothing up any more
    state.rmdir()  # empty: down removed what up made
