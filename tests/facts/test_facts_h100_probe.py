"""The whole facts probe as captured on the real H100 node (device machine, 2026-11-22):
the same script `envbuild facts` runs, parsed by the same pure parsers, then used for preflight."""

from __future__ import annotations


from envbuild.compat.check import preflight
from envbuild.facts.assemble import assemble
from envbuild.facts.profile import refine
from envbuild.facts.script import split_sections
from envbuild.recipes import load_recipe
from envbuild.targets import load_target
from support.paths import FIXTURES

CAPTURE = FIXTURES / "nodes" / "h100-ubuntu2404-cuda13" / "facts-probe.txt"


def facts():
    return assemble(split_sections(CAPTURE.read_text()), "h100-node")


def test_real_h100_probe_parses_every_fact() -> None:
    f = facts()
    assert [(g.name, g.compute_capability, g.memory_mib) for g in f.gpus] == [
        ("NVIDIA H100 80GB HBM3", "9.0", 81559)]
    assert (f.driver_version, f.driver_cuda, f.nvcc, f.cuda_home) == ("580.159.04", "13.0", "13.0", "/usr/local/cuda")
    assert f.os_id == "ubuntu" and f.os_version == "24.04" and f.glibc == "2.39"
    assert f.os_pretty == "Ubuntu 24.04.3 LTS"
    assert f.cpu_cores == 16 and 120 < f.memory_gib < 130
    assert f.python("3.12") is not None
    assert f.pip_packages["torch"] == "2.11.0"  # pip metadata carries no +cu130 tag on this node
    assert f.nccl_version == "2.28.9"
    assert f.topology and "GPU0" in f.topology
    # absent tools are recorded as missing, not raised
    assert not f.infiniband and "infiniband" in f.missing and "conda" in f.missing


def test_alpa_baseline_refused_on_the_real_h100_naming_sm90_and_the_wheel_cuda() -> None:
    target = load_target("h100")
    verdict = preflight(load_recipe("alpa-megatron"), target, refine(target, facts()))
    assert not verdict.feasible
    arch = next(v for v in verdict.violations if v.rule == "wheel-lacks-gpu-arch")
    assert "sm_90" in arch.message and "cu111" in arch.message and "11.1" in arch.message


H200X2 = FIXTURES / "nodes" / "h200x2-cuda13" / "facts-probe.txt"


def test_real_two_gpu_probe_keeps_the_nvlink_topology() -> None:
    """Captured on a 2x H200 node (device machine, 2026-11-22)."""
    f = assemble(split_sections(H200X2.read_text()), "h200x2")
    assert [(g.index, g.name, g.compute_capability) for g in f.gpus] == [
        (0, "NVIDIA H200", "9.0"), (1, "NVIDIA H200", "9.0")]
    assert f.archs == ["9.0"] and f.cpu_cores == 32
    assert "NV18" in f.topology  # GPU0 <-> GPU1 over 18 bonded NVLinks
