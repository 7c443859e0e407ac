"""The shipped target profiles as data; the h100 profile agrees with the captured node output."""

import csv
import re
from pathlib import Path

import pytest
import yaml

from envbuild.catalog import digest
from envbuild.errors import InputError
from envbuild.recipes import all_recipes
from envbuild.targets import DATA, load_target, target_names
from envbuild.targets.schema import Target

FIXTURES = Path("/work/shared/fixtures/nodes/h100-ubuntu2404-cuda13")
TARGETS = sorted(target_names())
# compute capability by GPU family (PINS.md, "GPU architectures vs torch/CUDA")
CC = {"A100": "8.0", "H100": "9.0", "RTX 4090": "8.9", "V100": "7.0"}


def test_the_profiles_are_shipped():
    assert set(TARGETS) == {"azure-nd96", "polaris", "rtx4090-pod", "slurm", "h100", "h100-venv", "local"}


@pytest.fixture(params=TARGETS)
def target(request) -> Target:
    return load_target(request.param)


def test_loads_and_round_trips(target):
    assert Target.model_validate(target.model_dump(mode="json", by_alias=True)) == target
    assert target.title and target.sources


def test_profiles_describe_gpus_and_pythons(target):
    if target.from_facts:
        assert target.gpus is None and not target.python  # nothing assumed
        return
    assert target.gpus and target.gpus.count >= 1 and target.python
    family = next(k for k in CC if k in target.gpus.model)
    assert target.gpus.compute_capability == CC[family]
    assert target.cuda.toolkit or target.cuda.driver_cuda
    for py in target.python:
        assert re.fullmatch(r"3\.\d+", py)


def test_node_files_referenced_by_env_are_described(target):
    for key, value in target.env.items():
        if key.endswith("_FILE"):
            assert value in target.files, f"{key}={value} has no entry in files"


def test_azure_carries_the_node_type_knowledge():
    t = load_target("azure-nd96")
    assert t.env["NCCL_TOPO_FILE"] == "/opt/microsoft/ndv4-topo.xml"
    assert {"NCCL_IB_PCI_RELAXED_ORDERING", "NCCL_SOCKET_IFNAME", "UCX_NET_DEVICES", "CUDA_DEVICE_ORDER"} <= set(t.env)
    assert t.cache_dir == "/mnt" and t.scheduler == "slurm" and t.infiniband
    assert {"3.8", "3.9"} <= set(t.python)


def test_schedulers_and_shapes():
    assert load_target("polaris").scheduler == "pbs"
    assert load_target("polaris").conda_modules == ["conda/2023-10-04"]
    pod = load_target("rtx4090-pod")
    assert (pod.scheduler, pod.shm_size, pod.gpus.count) == ("kubernetes", "16Gi", 4)
    assert load_target("slurm").container_runtime and "pyxis" in load_target("slurm").container_runtime
    assert load_target("local").from_facts


def test_h100_profile_matches_the_captured_node():
    """Each value is read from the real output captured on the node, not restated."""
    t = load_target("h100")
    with open(FIXTURES / "nvidia-smi-query.csv") as fh:
        row = {k.strip(): v.strip() for k, v in next(csv.DictReader(fh, skipinitialspace=True)).items()}
    assert row["name"] == t.gpus.model
    assert row["driver_version"] == t.cuda.driver
    assert row["compute_cap"] == t.gpus.compute_capability
    mib = int(row["memory.total [MiB]"].split()[0])
    assert abs(mib / 1024 - t.gpus.memory_gib) < 1.5
    smi = (FIXTURES / "nvidia-smi.txt").read_text()
    assert re.search(r"CUDA Version: (\d+\.\d+)", smi).group(1) == t.cuda.driver_cuda
    nvcc = (FIXTURES / "nvcc-version.txt").read_text()
    assert re.search(r"release (\d+\.\d+)", nvcc).group(1) == t.cuda.toolkit
    osr = dict(line.split("=", 1) for line in (FIXTURES / "os-release").read_text().splitlines() if "=" in line)
    assert osr["ID"] == t.platform.os_id and osr["VERSION_ID"].strip('"') == t.platform.os_version
    env = (FIXTURES / "torch-collect-env.txt").read_text()
    assert re.search(r"Libc version: glibc-(\S+)", env).group(1) == t.platform.glibc
    py = re.search(r"Python version: (\d+\.\d+)", env).group(1)
    assert t.python == [py]
    assert int(re.search(r"^CPU\(s\):\s+(\d+)", env, re.M).group(1)) == t.cpu_cores


def test_every_recipe_has_a_target_offering_its_python():
    for r in all_recipes():
        profiles = [load_target(n) for n in r.targets]
        assert any(t.from_facts or r.python in t.python for t in profiles), r.name


def _user_target(tmp_path, name: str, **changes) -> Target:
    """A user's copy of a shipped target file, with top-level sections replaced."""
    data = yaml.safe_load((DATA / f"{name}.yaml").read_text())
    data.update(changes)
    path = tmp_path / f"{name}-copy.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_target(path)


def test_the_lock_digest_leaves_out_how_jobs_are_submitted(tmp_path):
    """A target's jobs section (account, queue) is not the environment: a copy of polaris with
    its own account and queue keeps the shipped lock's digest; a different CUDA does not."""
    shipped = load_target("polaris")
    own = _user_target(tmp_path, "polaris", jobs={"requires": ["account"], "account": "myproj", "queue": "debug"})
    assert own.jobs.account == "myproj" and own != shipped
    assert digest(own) == digest(shipped)
    other_cuda = _user_target(tmp_path, "polaris", cuda={"toolkit": "12.1", "driver_cuda": "12.1"})
    assert digest(other_cuda) != digest(shipped)


@pytest.mark.parametrize("word", ["my project", "debug\n#PBS -W x", "-q", ""])
def test_a_jobs_value_is_one_directive_word(tmp_path, word):
    with pytest.raises(InputError):
        _user_target(tmp_path, "polaris", jobs={"queue": word})
