"""Preflight runs first: an infeasible node is refused before anything is installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.integration
def test_infeasible_recipe_is_refused_and_nothing_is_installed(tmp_path: Path) -> None:
    # The Alpa baseline on this GPU-less machine: torch 1.8.2+cu111 Apex needs GPUs and a
    # matching nvcc; preflight must refuse it with the violated rules, touching nothing.
    prefix = tmp_path / "env"
    env = {**os.environ, "ENVBUILD_HOME": str(tmp_path / "home")}
    p = subprocess.run([sys.executable, "-m", "envbuild", "provision", "--target", "local",
                        "--recipe", "alpa-megatron", "--prefix", str(prefix), "--no-smoke"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    assert not prefix.exists()
    run = next((tmp_path / "home" / "runs").glob("*-alpa-megatron-local"))
    (node,) = (run / "nodes").iterdir()
    result = json.loads((node / "result.json").read_text())
    assert result["status"] == "refused" and result["failed_step"] == "preflight"
    verdict = json.loads((node / "preflight.json").read_text())
    assert verdict["feasible"] is False
    rules = {v["rule"] for v in verdict["violations"] if v["severity"] == "error"}
    assert rules & {"nvcc-major-mismatch", "nvcc-missing"}, rules  # this machine's nvcc, or none
    # --no-smoke: the benchmark's GPU count is said, not a reason to refuse the install
    (gpus,) = [v for v in verdict["violations"] if v["rule"] == "too-few-gpus"]
    assert gpus["severity"] == "warning" and "--no-smoke" in gpus["message"]
    assert not (run / "ansible" / "artifacts").exists() or not any((run / "ansible" / "artifacts").iterdir())
