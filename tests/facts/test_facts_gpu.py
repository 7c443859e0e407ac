"""Facts on a real GPU node (device tier: run with -m gpu on a machine that has nvidia-smi)."""

import shutil
import subprocess

import pytest

from envbuild.facts.gather import gather_local

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="needs a real NVIDIA GPU (device machine)"),
]


def test_local_facts_match_nvidia_smi():
    facts = gather_local()
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.strip().splitlines()
    assert len(facts.gpus) == len(listed)
    assert facts.driver_version and facts.driver_cuda
    assert facts.topology and "GPU0" in facts.topology
    assert all(g.uuid and g.uuid in "\n".join(listed) for g in facts.gpus)
