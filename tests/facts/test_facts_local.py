"""Local gathering and the CLI on this machine; GPU tools are replaced by replays of real captures."""

import json
import os
import shutil

import pytest

from envbuild.facts.gather import gather_local
from envbuild.facts.load import load_facts
from envbuild.testbed.doubles import install_gpu_doubles
from support.clirun import envbuild as run_envbuild
from support.paths import FIXTURES

H100 = FIXTURES / "nodes" / "h100-ubuntu2404-cuda13"


def envbuild(*args, env=None):
    return run_envbuild(*args, env=env)


@pytest.fixture
def h100_path(tmp_path, monkeypatch):
    bin_dir = install_gpu_doubles(tmp_path / "bin", H100)
    path = f"{bin_dir}:{os.environ['PATH']}"
    monkeypatch.setenv("PATH", path)
    return path


def test_local_gather_with_replayed_h100_tools(h100_path):
    f = gather_local()
    assert [g.name for g in f.gpus] == ["NVIDIA H100 80GB HBM3"]
    assert f.archs == ["9.0"] and f.gpus[0].uuid.startswith("GPU-")
    assert (f.driver_version, f.driver_cuda, f.nvcc) == ("580.159.04", "13.0", "13.0")
    assert f.nvcc_path.endswith("/bin/nvcc")
    assert "gpus" not in f.missing
    # the rest is this machine, really gathered
    assert f.glibc and f.arch and f.cpu_cores and f.memory_gib and f.pythons


def test_cli_local_json_with_replayed_h100(h100_path, tmp_path):
    out = tmp_path / "facts.json"
    r = envbuild("facts", "--local", "--json", "-o", str(out), env={**os.environ, "PATH": h100_path})
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "envbuild.facts/1" and doc["gpus"][0]["compute_capability"] == "9.0"
    assert load_facts(out)[0].model_dump() == load_facts(out)[0].model_validate(doc).model_dump()


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has nvidia-smi")
def test_cli_local_on_gpu_less_machine_says_no_gpu():
    r = envbuild("facts", "--local")
    assert r.returncode == 0, r.stderr
    assert "no GPU" in r.stdout
    assert "nvidia-smi not found" in r.stdout


def test_cli_no_driver_is_no_gpu_not_an_error(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"  # what nvidia-smi prints on a node whose driver is not loaded
    no_driver = FIXTURES / "nodes" / "edge-cases" / "nvidia-smi-no-driver.txt"
    smi.write_text(f"#!/bin/sh\ncat {no_driver}\nexit 9\n")
    smi.chmod(0o755)
    r = envbuild("facts", "--json", env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["gpus"] == [] and doc["missing"]["gpus"].startswith("NVIDIA-SMI has failed")


def test_cli_rejects_conflicting_sources_and_missing_key(tmp_path):
    r = envbuild("facts", "--local", "--hosts", "h1")
    assert r.returncode == 2 and "hint:" in r.stderr and "Traceback" not in r.stderr
    r = envbuild("facts", "--hosts", "h1", "--identity", str(tmp_path / "nokey"))
    assert r.returncode == 2 and "nokey" in r.stderr
