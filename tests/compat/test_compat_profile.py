"""Profile facts (from_target) and live facts refined by a profile (refine)."""

from __future__ import annotations


from envbuild.facts.load import load_facts
from envbuild.facts.profile import from_target, refine
from envbuild.targets import load_target
from support.paths import DATA

A100 = DATA / "compat" / "a100-node.yaml"


def test_from_target_assumes_the_profile():
    t = load_target(A100)
    f = from_target(t)
    assert f.origin == "profile:a100-node" and f.host == "a100-node"
    assert [g.compute_capability for g in f.gpus] == ["8.0"] and f.gpus[0].memory_mib == 80 * 1024
    assert f.nvcc == "11.8" and f.driver_version == "520.61.05" and f.driver_cuda == "11.8"
    assert f.glibc == "2.35" and f.os_version == "22.04" and f.cpu_cores == 32 and f.memory_gib == 256
    assert [p.version for p in f.pythons] == ["3.10"] and f.python("3.10")
    assert f.infiniband == [] and f.container_engines == {}


def test_refine_keeps_live_values_and_fills_gaps():
    t = load_target(A100)
    live = load_facts(DATA / "facts" / "partial-nvcc114.json")[0]
    f = refine(t, live)
    assert f.nvcc == "11.4"  # live wins
    assert f.host == "nd96-partial"
    assert f.gpus and f.glibc == "2.35"  # filled
    assert f.origin == "collected+profile:a100-node"
    assert f.missing["glibc"] == "assumed from profile a100-node"


def test_refine_does_not_invent_what_the_node_lacks():
    t = load_target(A100)
    live = load_facts(DATA / "facts" / "partial-nvcc114.json")[0]
    live = live.model_copy(update={"nvcc": None, "missing": {"nvcc": "nvcc: not found"}})
    f = refine(t, live)
    assert f.nvcc is None and f.nvcc_path is None  # looked for and absent: stays absent
    assert f.gpus  # never looked at: the profile fills it


def test_refine_complete_facts_unchanged_and_local_target_is_facts_only():
    live = load_facts(DATA / "facts" / "h100-node.json")[0]
    assert refine(load_target("local"), live) is live
    full = load_facts(DATA / "facts" / "nd96-nvcc114.json")[0]
    f = refine(load_target(A100), full)
    assert f.nvcc == "11.4" and f.glibc == "2.31" and len(f.gpus) == 8
    assert f.pythons == full.pythons
