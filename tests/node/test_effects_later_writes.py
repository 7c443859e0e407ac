"""Issue 52: two installs write the same files. Apex 6424da3b's CUDA extensions and GPT-NeoX's
fused kernels (``megatron/fused_kernels/setup.py install``, run after Apex as the published
Dockerfile does) both install ``scaled_masked_softmax_cuda`` and
``scaled_upper_triang_masked_softmax_cuda`` into site-packages. The source's ``build_provides``
names them; the plan's build step carries them, the effect of every dists step before that build
says which later step writes which module (``later_writes``), and the node's check needs those
files there but does not compare them with the earlier RECORD: the second provision is a no-op
(docs/results/h200-run13.md, "What it shows for issue 52").
"""

from __future__ import annotations

import base64
import doctest
import hashlib
import importlib
import sys
from pathlib import Path

import pytest

from envbuild.actions.effects import DistsEffect, effect_data, effects
from envbuild.lock.check import check_lock_file
from envbuild.lock.location import SHIPPED_LOCKDIR
from envbuild.node import effects as node_effects
from envbuild.plan import params as P
from envbuild.plan.build import PlanOptions, build_plan
from envbuild.plan.model import Plan, Step
from envbuild.recipes import load_recipe

from support.h100 import h100_node

KERNELS = ("scaled_upper_triang_masked_softmax_cuda", "scaled_masked_softmax_cuda")
SUFFIX = ".cpython-312-x86_64-linux-gnu.so"
BUILD = "build:neox-fused-kernels"


def _plan_on_h100(name: str) -> Plan:
    target, facts = h100_node()
    recipe = load_recipe(name)
    lock = check_lock_file(SHIPPED_LOCKDIR / name / "h100-venv.lock", recipe, target)
    return build_plan(recipe, target, facts, lock, PlanOptions(backend="venv", prefix="/opt/envs/neox"))


def test_neox_plan_says_the_fused_kernels_write_over_apex():
    plan = _plan_on_h100("gpt-neox-sm90")
    steps = {s.id: s for s in plan.steps}
    build = steps[BUILD].params
    assert isinstance(build, P.BuildParams) and build.env_writer() and sorted(build.provides) == sorted(KERNELS)
    assert "provides" in build.model_dump(mode="json")  # in the step's data, so in its digest
    eff = effects(plan)
    apex = eff["apex:apex"]
    assert isinstance(apex, DistsEffect) and apex.dists == {"apex": None}
    assert apex.later_writes == {m: BUILD for m in KERNELS}
    assert effect_data(plan)["apex:apex"]["later_writes"] == {m: BUILD for m in KERNELS}
    ids = [s.id for s in plan.steps]
    for sid, e in eff.items():  # every dists step before the build, none after it
        if isinstance(e, DistsEffect):
            assert e.later_writes == ({m: BUILD for m in KERNELS} if ids.index(sid) < ids.index(BUILD) else {}), sid


def test_a_plan_without_such_a_build_says_nothing():
    plan = _plan_on_h100("h100-megatron-deepspeed")  # Apex 6424da3b, no build that provides modules
    eff = effects(plan)
    assert isinstance(eff["apex:apex"], DistsEffect)
    assert all(not e.later_writes for e in eff.values() if isinstance(e, DistsEffect))
    data = effect_data(plan)
    assert all("later_writes" not in d for d in data.values() if d)  # omitted when empty
    assert all("provides" not in s.params.model_dump(mode="json") for s in plan.builds())


def _pip_then(*later: Step) -> Plan:
    pip = Step(id="pip:packages", title="", params=P.PipInstallParams(requirements=[
        P.Requirement(name="apex", version="0.1", requirement="apex==0.1", hashes=["sha256:00"])]))
    return Plan(recipe="r", target="t", host="h", prefix="/e", backend="venv", steps=[pip, *later])


def test_only_a_later_build_that_installs_into_the_environment_counts():
    writes = P.BuildParams(name="k", dest="/t", commands=["python setup.py install"], provides=["k_cuda"])
    in_tree = P.BuildParams(name="k", dest="/t", commands=["make -C kernels"], provides=["k_cuda"])
    later = effects(_pip_then(Step(id="build:k", title="", params=writes)))["pip:packages"]
    assert isinstance(later, DistsEffect) and later.later_writes == {"k_cuda": "build:k"}
    built_in_tree = effects(_pip_then(Step(id="build:k", title="", params=in_tree)))["pip:packages"]
    assert isinstance(built_in_tree, DistsEffect) and built_in_tree.later_writes == {}
    first = Plan(recipe="r", target="t", host="h", prefix="/e", backend="venv",
                 steps=[Step(id="build:k", title="", params=writes), *_pip_then().steps])
    before = effects(first)["pip:packages"]
    assert isinstance(before, DistsEffect) and before.later_writes == {}  # the build came first


def test_module_examples_hold():
    for name in ("envbuild.actions.effects", "envbuild.plan.params", "envbuild.node.effects"):
        result = doctest.testmod(importlib.import_module(name))
        assert result.attempted > 0 and result.failed == 0, name


# node side: a real site-packages folder, Apex's RECORD, the kernels rewritten by the later build

def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@pytest.fixture
def site(tmp_path, monkeypatch):
    site = tmp_path / "site"
    info = site / "apex-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: apex\nVersion: 0.1\n\n")
    files = {f"{info.name}/METADATA": (info / "METADATA").read_bytes(),
             "apex/__init__.py": b"import apex.optimizers\n",
             "amp_C" + SUFFIX: b"\x7fELF amp_C" * 100,
             **{m + SUFFIX: b"\x7fELF apex " + m.encode() * 50 for m in KERNELS}}
    rows = []
    for rel, data in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
        rows.append(f"{rel},sha256={_b64(data)},{len(data)}")
    (info / "RECORD").write_text("\n".join(rows + [f"{info.name}/RECORD,,"]) + "\n")
    monkeypatch.setattr(sys, "path", [str(site)])  # the environment of sys.executable is this folder
    for m in KERNELS:  # the fused kernels' install, after Apex's: other bytes, another size
        (site / (m + SUFFIX)).write_bytes(b"\x7fELF neox " + m.encode() * 70)
    return site


def _check(tmp_path: Path, later: dict[str, str] | None, deep: bool = False) -> dict:
    eff = {"check": "dists", "python": sys.executable, "dists": {"apex": None}}
    if later:
        eff["later_writes"] = later
    ctx = node_effects.EffectContext(str(tmp_path / "state"), deep=deep)
    return node_effects.check_effect(eff, ctx, "apex:apex")


LATER = {m: BUILD for m in KERNELS}


def test_the_kernels_written_over_are_not_compared_and_the_check_says_so(tmp_path, site):
    without = _check(tmp_path, None)  # as in run 13: apex's check fails on the two kernels
    assert not without["ok"] and without["repair"]
    assert "apex 0.1: 2 file(s) differ from its RECORD" in without["detail"]
    for deep in (False, True):
        res = _check(tmp_path, LATER, deep)
        assert res["ok"], res["detail"]
        assert res["detail"].endswith(
            "; 2 file(s) written over by build:neox-fused-kernels (its build_provides), not compared"), res["detail"]


def test_another_changed_file_still_fails(tmp_path, site):
    (site / ("amp_C" + SUFFIX)).write_bytes(b"\x7fELF other" * 100)  # same size, other bytes
    res = _check(tmp_path, LATER)
    assert not res["ok"] and res["repair"]
    assert "1 file(s) differ from its RECORD: amp_C%s (content differs from RECORD)" % SUFFIX in res["detail"]
    assert "scaled_masked_softmax_cuda" not in res["detail"].split(";")[0]


def test_a_missing_provided_file_still_fails(tmp_path, site):
    (site / (KERNELS[1] + SUFFIX)).unlink()
    res = _check(tmp_path, LATER)
    assert not res["ok"] and res["repair"]
    assert f"{KERNELS[1]}{SUFFIX} (missing)" in res["detail"]


def test_a_module_of_that_name_in_a_package_is_compared(tmp_path, site):
    """Only a top-level extension module is the build's: pkg/<module>.so stays Apex's."""
    info = site / "apex-0.1.dist-info"
    data = b"\x7fELF nested"
    (site / "apex" / (KERNELS[0] + ".so")).write_bytes(data)
    with open(info / "RECORD", "a") as fh:
        fh.write(f"apex/{KERNELS[0]}.so,sha256={_b64(data)},{len(data)}\n")
    assert _check(tmp_path, LATER)["ok"]
    (site / "apex" / (KERNELS[0] + ".so")).write_bytes(b"\x7fELF other!")
    res = _check(tmp_path, LATER)
    assert not res["ok"] and f"apex/{KERNELS[0]}.so (content differs from RECORD)" in res["detail"]


def test_recorded_then_a_no_op_then_the_build_again(tmp_path, site):
    """Apex's step records its marker and manifest; the no-op reads no file and still says which
    files are the build's; the build writing them again changes their stat, and they stay uncompared."""
    from envbuild.node import state as node_steps

    eff = {"check": "dists", "python": sys.executable, "dists": {"apex": None}, "later_writes": LATER}
    (tmp_path / ".envbuild" / "state").mkdir(parents=True)
    node_steps.record_step(str(tmp_path), "apex:apex", "d1", eff)
    state = str(tmp_path / ".envbuild" / "state")
    res = node_effects.check_effect(eff, node_effects.EffectContext(state), "apex:apex")
    assert res["ok"] and not res["rewrite"] and "2 file(s) written over by " + BUILD in res["detail"]
    for m in KERNELS:
        (site / (m + SUFFIX)).write_bytes(b"\x7fELF rebuilt " + m.encode() * 60)
    res = node_effects.check_effect(eff, node_effects.EffectContext(state), "apex:apex")
    assert res["ok"] and res["rewrite"] and "2 file(s) written over by " + BUILD in res["detail"]
