"""The plan is pure data: golden JSON per recipe x target profile, and decisions from facts."""

from __future__ import annotations

import json
import os

import pytest

from envbuild.facts.model import NodeFacts
from envbuild.facts.model import UvBinary
from envbuild.facts.profile import from_target
from envbuild.plan.build import PlanOptions, build_plan
from envbuild.plan.model import Plan
from envbuild.plan.resolve import resolve
from envbuild.recipes import all_recipes, load_recipe
from envbuild.targets import load_target
from support.ib_inventory import profile_facts
from support import paths
from support.paths import FIXTURES

GOLDEN = paths.GOLDEN / "plans"
PAIRS = [(r.name, t) for r in all_recipes() for t in r.targets if t != "local"]


@pytest.mark.parametrize("recipe,target", PAIRS)
def test_plan_matches_golden(recipe: str, target: str) -> None:
    rec, tgt = load_recipe(recipe), load_target(target)
    plan = resolve(rec, tgt, profile_facts(tgt), None, PlanOptions(host=target)).plan
    text = plan.to_json()
    path = GOLDEN / f"{recipe}--{target}.json"
    if os.environ.get("ENVBUILD_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; create it with ENVBUILD_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"plan changed; review and rerun with ENVBUILD_UPDATE_GOLDEN=1 ({path})"


# the controller's uv as data (envbuild.facts.uvbin finds the real one): the plan with uv is
# as pure as without; nodes of the same architecture and a glibc it runs on get it
UV = UvBinary(version="0.13.9", sha256="5" * 64, os="linux", arch="x86_64", libc="glibc", glibc_min="2.17")


@pytest.mark.parametrize("recipe,target", PAIRS)
def test_plan_with_uv_matches_golden(recipe: str, target: str) -> None:
    rec, tgt = load_recipe(recipe), load_target(target)
    plan = resolve(rec, tgt, profile_facts(tgt), None, PlanOptions(host=target, uv=UV)).plan
    text = plan.to_json()
    path = GOLDEN / f"{recipe}--{target}--uv.json"
    if os.environ.get("ENVBUILD_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; create it with ENVBUILD_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"plan changed; review and rerun with ENVBUILD_UPDATE_GOLDEN=1 ({path})"


def test_a_venv_that_uv_fills_is_made_without_pip() -> None:
    """With uv and a locked pip, ensurepip's pip (2-3 CPU-s of the environment step) would only be
    replaced by pip-tooling: the venv is made --without-pip. Up to Python 3.11 ensurepip also
    brings setuptools, which a build without isolation needs: for a recipe that builds sources
    in the environment and pins no setuptools of its own, pip-tooling first puts in the
    interpreter's ensurepip wheel of it (from Python 3.10, whose ensurepip names it); before
    3.10 such a venv keeps ensurepip. With pip as the installer the venv keeps its own pip."""
    from envbuild.actions.steps import SEED_ENSUREPIP, plan_actions

    def env_step(rec, target: str, **kw):
        tgt = load_target(target)
        plan = resolve(rec, tgt, profile_facts(tgt), None, PlanOptions(host=target, **kw)).plan
        ids = [s.id for s in plan.steps]
        acts = dict((s.id, a) for s, a in plan_actions(plan))
        [venv] = [a.argv for a in acts["environment"] if "venv" in getattr(a, "argv", [])]
        tooling = next((s for s in plan.steps if s.id == "pip-tooling"), None)
        seeds = [a for a in acts.get("pip-tooling", []) if getattr(a, "argv", [])[2:4] == [SEED_ENSUREPIP, "setuptools"]]
        seeded = bool(tooling and tooling.params.seed_setuptools)
        assert seeded == bool(seeds) and (not seeds or acts["pip-tooling"][0] is seeds[0])  # first
        return venv, ids, next(s for s in plan.steps if s.id == "environment"), seeded

    alpa_h100, cpu, alpa = load_recipe("alpa-megatron-h100"), load_recipe("cpu-reference"), load_recipe("alpa-megatron")
    assert alpa_h100.sources and alpa_h100.python == "3.12" and not cpu.sources and cpu.python == "3.11"
    assert alpa.python == "3.8" and alpa.sources and alpa.environment.setuptools == "59.5.0"
    unpinned = alpa.model_copy(update={"environment": alpa.environment.model_copy(update={"setuptools": None})})
    cases = [  # recipe, target, seeded: 3.12 building sources; 3.11 building nothing; 3.11 building
        # sources; 3.8 building sources with its own setuptools pinned (pip-tooling installs it)
        (alpa_h100, "h100-venv", False), (cpu, "local", False),
        (alpa_h100.model_copy(update={"python": "3.11"}), "h100-venv", True), (alpa, "h100", False)]
    for recipe, target, seeded in cases:
        venv, ids, step, seeds = env_step(recipe, target, uv=UV)
        assert "--without-pip" in venv and ids.index("pip-tooling") > ids.index("environment"), recipe.name
        assert step.params.with_pip is False and "--without-pip" in step.reason
        assert seeds == seeded and ("ensurepip" in step.reason) == seeded, (recipe.name, recipe.python)
    venv, _, step, seeds = env_step(unpinned, "h100", uv=UV)  # 3.8: its ensurepip names no wheel
    assert "--without-pip" not in venv and step.params.with_pip and not seeds
    venv, _, step, seeds = env_step(alpa_h100.model_copy(update={"python": "3.11"}), "h100-venv", uv=UV,
                                    installer="pip")
    assert "--without-pip" not in venv and step.params.with_pip and not seeds
    assert "with_pip" not in step.params.model_dump()  # plans made before keep their digests


def test_a_venv_whose_recipe_locks_no_pip_gets_ensurepips_wheels_from_uv() -> None:
    """A recipe that locks no pip still gets the pip `python -m venv` gives: with uv the venv is
    made --without-pip and pip-tooling (then only that) puts in, with uv, what ensurepip would
    (pip, and setuptools up to Python 3.11; pip alone from 3.12), and its effect names them at
    any version. Not with pip as the installer, not before Python 3.10, not for a recipe that
    locks pip (pip-tooling installs that one), not for another backend."""
    from envbuild.actions.effects import effects
    from envbuild.actions.steps import SEED_ENSUREPIP, plan_actions
    from envbuild.lock.tooling import tooling

    site = load_recipe("nanogpt-h100")  # its venv sees the node's packages (system site packages)
    assert site.python == "3.12" and "pip" not in [t.name for t in tooling(site)]
    assert site.environment.system_site_packages
    nano = site.model_copy(update={"environment": site.environment.model_copy(update={"system_site_packages": False})})

    def planned(recipe, **kw):
        tgt = load_target("h100-venv")
        return resolve(recipe, tgt, profile_facts(tgt), None, PlanOptions(host="h100-venv", **kw)).plan

    for python, names in (("3.12", ["pip"]), ("3.11", ["pip", "setuptools"]), ("3.10", ["pip", "setuptools"])):
        plan = planned(nano.model_copy(update={"python": python}), uv=UV)
        ids = [s.id for s in plan.steps]
        acts = dict((s.id, a) for s, a in plan_actions(plan))
        env = next(s for s in plan.steps if s.id == "environment")
        step = next(s for s in plan.steps if s.id == "pip-tooling")
        assert env.params.with_pip is False and "ensurepip wheels" in env.reason, python
        assert ids.index("environment") < ids.index("uv") < ids.index("pip-tooling"), ids
        assert step.params.seed_ensurepip == names and step.params.requirements == []
        assert [a.argv[:4] for a in acts["pip-tooling"]] == [[f"{plan.prefix}/bin/python", "-c", SEED_ENSUREPIP,
                                                               ",".join(names)]]
        assert len(acts["pip-tooling"]) == 1  # one seed: ensurepip's wheels, setuptools not again
        assert list(effects(plan)["pip-tooling"].dists) == names  # any version: None
        assert set(effects(plan)["pip-tooling"].dists.values()) == {None}
        assert step.params.model_dump()["seed_ensurepip"] == names
    for recipe, kw in ((nano, {"installer": "pip"}), (nano.model_copy(update={"python": "3.9"}), {"uv": UV}),
                       (nano.model_copy(update={"python": "3.13"}), {"uv": UV}), (nano, {}), (site, {"uv": UV}),
                       (nano, {"uv": UV, "backend": "module-venv"})):
        plan = planned(recipe, **kw)
        env = next(s for s in plan.steps if s.id == "environment")
        assert env.params.with_pip is True and "pip-tooling" not in [s.id for s in plan.steps], (recipe.python, kw)
    # a recipe that locks setuptools (and no pip) on 3.11: ensurepip's pip alone, then its setuptools
    pinned = nano.model_copy(update={"python": "3.11", "environment": nano.environment.model_copy(
        update={"setuptools": "69.5.1"})})
    plan = planned(pinned, uv=UV)
    step = next(s for s in plan.steps if s.id == "pip-tooling")
    acts = dict((s.id, a) for s, a in plan_actions(plan))["pip-tooling"]
    assert step.params.seed_ensurepip == ["pip"] and [r.name for r in step.params.requirements] == ["setuptools"]
    assert acts[0].argv[2:4] == [SEED_ENSUREPIP, "pip"] and "setuptools==69.5.1" in acts[-1].argv
    assert effects(plan)["pip-tooling"].dists == {"pip": None, "setuptools": "69.5.1"}
    cpu = load_recipe("cpu-reference")  # locks pip: pip-tooling installs it, no seed
    tgt = load_target("local")
    plan = resolve(cpu, tgt, profile_facts(tgt), None, PlanOptions(host="local", uv=UV)).plan
    step = next(s for s in plan.steps if s.id == "pip-tooling")
    assert step.params.seed_ensurepip == [] and "seed_ensurepip" not in step.params.model_dump()


def test_plan_is_pure_and_stable() -> None:
    rec, tgt = load_recipe("opt-175b-azure"), load_target("azure-nd96")
    facts = from_target(tgt)
    a = build_plan(rec, tgt, facts, None).to_json()
    b = build_plan(rec, tgt, facts, None).to_json()
    assert a == b


def _nd96_with_nvcc(nvcc: str) -> NodeFacts:
    return from_target(load_target("azure-nd96")).model_copy(update={"nvcc": nvcc})


def test_apex_check_relaxed_for_same_major_minor_mismatch() -> None:
    rec, tgt = load_recipe("opt-175b-azure"), load_target("azure-nd96")
    plan = build_plan(rec, tgt, _nd96_with_nvcc("11.4"), None)
    variant = next(d for d in plan.decisions if d.subject == "torch-variant")
    assert variant.outcome == "cu113"
    patch = next(d for d in plan.decisions if d.subject.startswith("patch:") and "apex" in d.subject)
    assert patch.outcome == "patched"
    assert "11.4" in patch.reason and "11.3" in patch.reason
    assert any(s.params.patch_kind == "apex-cuda-check" for s in plan.patches())
    # deviation torch-1.10.0-cu116: cu113 up to CUDA 11.x, cu111 below 11.3, never a cu116 wheel
    for nvcc, tag in (("11.6", "cu113"), ("11.2", "cu111")):
        other = build_plan(rec, tgt, _nd96_with_nvcc(nvcc), None)
        assert next(d for d in other.decisions if d.subject == "torch-variant").outcome == tag, nvcc


def test_apex_check_not_patched_when_versions_equal() -> None:
    rec, tgt = load_recipe("opt-175b-azure"), load_target("azure-nd96")
    plan = build_plan(rec, tgt, _nd96_with_nvcc("11.3"), None)
    patch = next(d for d in plan.decisions if d.subject.startswith("patch:") and "apex" in d.subject)
    assert patch.outcome == "unchanged"
    assert not any(s.params.patch_kind == "apex-cuda-check" for s in plan.patches())


def test_arch_list_and_jobs_come_from_facts() -> None:
    rec, tgt = load_recipe("alpa-megatron"), load_target("azure-nd96")
    plan = build_plan(rec, tgt, from_target(tgt), None)
    apex = plan.apex_builds()[0]
    assert apex.params.env["TORCH_CUDA_ARCH_LIST"] == "8.0"
    assert int(apex.params.env["MAX_JOBS"]) > 1


def test_step_ids_unique_and_digests_change_with_params() -> None:
    rec, tgt = load_recipe("alpa-megatron"), load_target("azure-nd96")
    plan = build_plan(rec, tgt, from_target(tgt), None)
    ids = [s.id for s in plan.steps]
    assert len(ids) == len(set(ids))
    other = build_plan(rec, tgt, from_target(tgt), None, PlanOptions(prefix="/elsewhere"))
    env_a = next(s for s in plan.steps if s.id == "environment")
    env_b = next(s for s in other.steps if s.id == "environment")
    assert env_a.digest != env_b.digest


def test_env_file_carries_target_nccl_variables() -> None:
    rec, tgt = load_recipe("opt-175b-azure"), load_target("azure-nd96")
    plan = build_plan(rec, tgt, from_target(tgt), None)
    env = plan.env_file().params.vars
    assert env.get("NCCL_TOPO_FILE") and env.get("NCCL_SOCKET_IFNAME") == "eth0"
    assert json.loads(plan.to_json())["schema"] == "envbuild.plan/2"


@pytest.mark.parametrize("recipe,target", PAIRS)
def test_plan_json_reads_back_typed(recipe: str, target: str) -> None:
    """A plan read back from its JSON is the same typed plan, with the same digests."""
    rec, tgt = load_recipe(recipe), load_target(target)
    plan = resolve(rec, tgt, profile_facts(tgt), None, PlanOptions(host=target)).plan
    back = Plan.model_validate_json(plan.to_json())
    assert back == plan
    assert [s.digest for s in back.steps] == [s.digest for s in plan.steps]
    assert all(type(a.params) is type(b.params) for a, b in zip(back.steps, plan.steps))


def test_step_params_are_checked_by_kind() -> None:
    """A step whose params do not fit its kind is refused, not guessed at."""
    import pydantic

    typed = resolve(load_recipe("cpu-reference"), load_target("local"),
                    from_target(load_target("slurm")), None, PlanOptions()).plan
    plan = json.loads(typed.to_json())
    env = plan["steps"][typed.steps.index(typed.environment())]
    env["params"]["prefixx"] = env["params"].pop("prefix")
    with pytest.raises(pydantic.ValidationError):
        Plan.model_validate(plan)
    env["params"]["prefix"] = env["params"].pop("prefixx")
    env["kind"] = "pip_install"
    with pytest.raises(pydantic.ValidationError):
        Plan.model_validate(plan)


def test_home_fact_makes_the_prefix_absolute() -> None:
    rec, tgt = load_recipe("alpa-megatron"), load_target("azure-nd96")
    facts = from_target(tgt).model_copy(update={"home": "/home/alice"})
    plan = build_plan(rec, tgt, facts, None)
    assert plan.prefix.startswith("/")  # the azure profile has a cache dir
    plan = build_plan(load_recipe("cpu-reference"), load_target("local"), facts, None)
    assert plan.prefix == "/home/alice/.envbuild/envs/cpu-reference"
    assert all("~" not in json.dumps(s.params.model_dump()) for s in plan.steps)


def test_the_smoke_step_uses_every_gpu_the_node_has_unless_torch_is_the_cpu_build() -> None:
    """The real 2x H200 node's facts: the Polaris stack over the node's torch runs its gpt smoke
    on a GPU and its all-reduce as 2 NCCL ranks; cpu-reference, whose torch is the CPU build,
    keeps 2 gloo ranks on the CPU on the same node."""
    from envbuild.facts.assemble import assemble
    from envbuild.facts.profile import refine
    from envbuild.facts.script import split_sections

    capture = FIXTURES / "nodes" / "h200x2-cuda13" / "facts-probe.txt"

    def smoke_argv(recipe: str, target: str) -> dict[str, list[str]]:
        tgt = load_target(target)
        facts = refine(tgt, assemble(split_sections(capture.read_text()), "h200x2"))
        assert len(facts.gpus) == 2
        plan = resolve(load_recipe(recipe), tgt, facts, None, PlanOptions(host="h200x2")).plan
        smoke = plan.smoke()
        return {r.name: r.argv[2:] for r in smoke.params.runs if r.name in ("gpt", "collective")}

    gpu = smoke_argv("h100-megatron-deepspeed", "h100-venv")
    assert gpu["gpt"][-2:] == ["--device", "cuda"]
    assert gpu["collective"] == ["--json", "--device", "cuda", "--node-gpus", "2"]
    cpu = smoke_argv("cpu-reference", "local")
    assert "cuda" not in cpu["gpt"] and cpu["collective"] == ["--json", "--device", "cpu", "--nproc", "2"]
