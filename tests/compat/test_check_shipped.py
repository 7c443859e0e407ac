"""Must-hold verdicts on the shipped recipes and targets, and the full recipe x target matrix."""

from __future__ import annotations


import pytest

from envbuild.compat.check import preflight
from envbuild.facts.load import load_facts
from envbuild.facts.profile import from_target, refine
from envbuild.recipes import load_recipe, recipe_names
from envbuild.targets import load_target, target_names
from support.paths import DATA

FACTS = DATA / "facts"


def shipped(recipe: str, target: str):
    if recipe not in recipe_names() or target not in target_names():
        pytest.fail(f"shipped recipe {recipe!r} or target {target!r} is missing")
    return load_recipe(recipe), load_target(target)


def test_alpa_megatron_feasible_on_azure_nd96():
    r, t = shipped("alpa-megatron", "azure-nd96")
    v = preflight(r, t, from_target(t))
    assert v.feasible, [x.message for x in v.errors]
    assert v.torch_variant == "1.8.2+cu111"


def test_alpa_megatron_infeasible_on_h100_naming_sm90_and_cu111():
    r, t = shipped("alpa-megatron", "h100")
    v = preflight(r, t, from_target(t))
    assert not v.feasible
    arch = next(x for x in v.errors if x.rule == "wheel-lacks-gpu-arch")
    assert "sm_90" in arch.message and "cu111" in arch.message and "CUDA 11.1" in arch.message
    assert "megatron-fused-kernels-arch" in {x.rule for x in v.errors}
    # and names the shipped variant for sm_90 (alpa-megatron-h100, locked for h100-venv)
    assert [(x.recipe, x.targets) for x in v.variants] == [("alpa-megatron-h100", ["h100-venv"])]


def test_alpa_megatron_infeasible_on_the_captured_h100_node():
    r, t = shipped("alpa-megatron", "h100")
    v = preflight(r, t, refine(t, load_facts(FACTS / "h100-node.json")[0]))
    assert not v.feasible and v.host == "h100-node"
    assert any("sm_90" in x.message and "11.1" in x.message for x in v.errors)


def test_opt_on_nd96_with_nvcc_114_is_feasible_with_apex_check_relaxed():
    r, t = shipped("opt-175b-azure", "azure-nd96")
    v = preflight(r, t, refine(t, load_facts(FACTS / "nd96-nvcc114.json")[0]))
    assert v.feasible, [x.message for x in v.errors]
    assert v.torch_variant == "1.10.1+cu113" and "75992" in v.torch_reason
    relaxed = next(x for x in v.warnings if x.rule == "nvcc-minor-mismatch")
    assert "same major 11" in relaxed.message and "apex-cuda-check" in relaxed.message


def test_opt_on_nd96_with_nvcc_102_is_infeasible():
    r, t = shipped("opt-175b-azure", "azure-nd96")
    v = preflight(r, t, refine(t, load_facts(FACTS / "nd96-nvcc102.json")[0]))
    assert not v.feasible
    assert {"nvcc-too-old-for-gpu", "wheel-lacks-gpu-arch"} <= {x.rule for x in v.errors}


def test_every_shipped_recipe_on_every_shipped_target_gives_a_verdict():
    targets = [load_target(n) for n in target_names() if n != "local"]
    assert recipe_names() and targets
    for name in recipe_names():
        r = load_recipe(name)
        for t in targets:
            v = preflight(r, t, from_target(t))
            assert v.feasible == (not v.errors)
            assert len(v.passed) + len(v.violations) > 30
            for x in v.violations:
                assert x.message and x.fix and x.source
