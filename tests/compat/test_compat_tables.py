"""The compatibility tables as data: every row sourced and explained; lookups and choices."""

from __future__ import annotations

import pytest

from envbuild import cuda_arch as ca
from envbuild.compat.commits import APEX_COMMITS
from envbuild.compat.rules import RULES
from envbuild.compat.torch_wheels import WHEELS, choose_variant, find, variants
from envbuild.facts.model import Gpu, NodeFacts


def node(nvcc=None, cc="8.0", driver=None, driver_cuda=None, gpus=1) -> NodeFacts:
    return NodeFacts(host="n", nvcc=nvcc, driver_version=driver, driver_cuda=driver_cuda,
                     gpus=[Gpu(index=i, name="GPU", compute_capability=cc) for i in range(gpus)])


def test_every_rule_row_has_why_source_fix():
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    for r in RULES:
        assert r.severity in ("error", "warning")
        for field in ("what", "why", "source", "fix"):
            assert len(getattr(r, field).strip()) > 8, (r.id, field)
        assert callable(r.when)


def test_every_wheel_row_is_sourced_and_consistent():
    for w in WHEELS:
        assert w.why and w.source, w
        assert w.tag == "cpu" or w.cuda, w
        assert (w.tag == "cpu") == (not w.archs), w
        for p in w.pythons:
            assert p.startswith("3."), w
    for row in ca.ARCH_MIN_CUDA + ca.DRIVER_MIN:
        assert row.why and row.source
    assert all(len(c.date) == 10 for c in APEX_COMMITS)


def test_lts_variants_and_arch_lists():
    assert sorted(w.tag for w in variants("1.8.2")) == ["cpu", "cu102", "cu111"]
    assert "8.0" not in find("1.8.2", "cu102").archs
    assert {"7.5", "8.0", "8.6"} <= set(find("1.8.2", "cu111").archs)
    assert find("1.8.2", "cu111").ptx == ()
    assert find("1.8.2", "cu111").index == "https://download.pytorch.org/whl/lts/1.8/torch_lts.html"
    assert find("1.8.2+cu111", "cu111") is find("1.8.2", "cu111")


def test_unpublished_and_new_variants():
    assert find("1.10.0", "cu116") is None and variants("1.10.0")
    assert find("1.12.1", "cu116") is not None
    assert "9.0" in find("2.0.1", "cu118").archs and "9.0" not in find("2.0.1", "cu117").archs
    assert find("2.13.0", "cpu").pypi
    assert find("2.11.0", "cu130") is not None
    assert variants("9.9.9") == []


@pytest.mark.parametrize("cc,cuda", [("7.0", "9.0"), ("8.0", "11.0"), ("8.6", "11.1"), ("8.9", "11.8"),
                                     ("9.0", "11.8")])
def test_min_cuda_for_arch(cc, cuda):
    assert ca.min_cuda_for_arch(cc) == cuda


@pytest.mark.parametrize("driver,cuda", [("470.82.01", "11.4"), ("525.60.13", "12.0"), ("535.104.05", "12.2"),
                                         ("580.159.04", "13.0"), ("440.33.01", "10.2"), ("390.1", None)])
def test_driver_max_cuda(driver, cuda):
    assert ca.max_cuda_for_driver(driver) == cuda


def test_cubin_compatibility():
    assert ca.cubin_runs("8.0", "8.6") and ca.cubin_runs("8.0", "8.9")
    assert not ca.cubin_runs("8.6", "8.0")
    assert not ca.cubin_runs("8.6", "9.0")
    assert ca.binary_runs(["8.0"], ["8.0"], "9.0")  # PTX JIT-compiles forward
    assert not ca.binary_runs(["7.0", "8.0", "8.6"], [], "9.0")


def test_choose_auto_same_major_highest_minor():
    tag, why = choose_variant("1.10.1", "auto", node(nvcc="11.4"))
    assert tag == "cu113"
    assert "pytorch/issues/75992" in why and "11.4" in why


def test_choose_auto_exact_and_lower():
    assert choose_variant("1.10.1", "auto", node(nvcc="11.1"))[0] == "cu111"
    assert choose_variant("1.10.1", "auto", node(nvcc="10.2"))[0] == "cu102"
    assert choose_variant("2.0.1", "auto", node(nvcc="12.4"))[0] == "cu118"  # no 12.x variant: nearest below


def test_choose_auto_uses_driver_without_nvcc_and_cpu_without_gpu():
    tag, why = choose_variant("1.12.1", "auto", node(driver="470.82.01"))
    assert tag == "cu113" and "driver CUDA 11.4" in why
    assert choose_variant("1.12.1", "auto", node(gpus=0))[0] == "cpu"


def test_choose_fixed_tag_and_pypi_default():
    assert choose_variant("1.8.2", "cu111", node(nvcc="13.0")) == ("cu111", "fixed by the recipe (cuda: cu111)")
    assert choose_variant("1.10.1+cu113", None, node())[0] == "cu113"
    assert choose_variant("2.13.0", None, node())[0] == "cpu"
    assert choose_variant("2.5.0", None, node())[0] == "pypi"
