"""h100-megatron-deepspeed: the Polaris stack over the H100 node's own torch (CPU-side checks).

The real node's facts (tests/fixtures/nodes/h100-ubuntu2404-cuda13) decide the plan; the
published pins (Apex 52e18c89, DeepSpeed 0.10.3) are refused there with the rows that say why;
the plan builds Apex and DeepSpeed's FusedAdam for sm_90 only, offline from a bundle; the venv
over the node's torch venv sees that venv's packages; the recipe's patches apply to the pinned
Megatron-DeepSpeed text.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.compat.check import preflight
from envbuild.lock.location import SHIPPED_LOCKDIR
from envbuild.recipes import load_recipe
from envbuild.targets import load_target
from support.h100 import h100_node
from support.paths import DATA

HEAD = DATA / "megatron_ds_e4bac701_pretrain_gpt_head.py.txt"
RECIPE = "h100-megatron-deepspeed"



def test_feasible_on_the_real_h100_and_the_lock_is_current():
    target, facts = h100_node()
    verdict = preflight(load_recipe(RECIPE), target, facts)
    assert verdict.feasible, [v.message for v in verdict.violations]
    from envbuild.lock.check import check_lock_file

    lock = check_lock_file(SHIPPED_LOCKDIR / RECIPE / "h100-venv.lock", load_recipe(RECIPE), target)
    assert {g.name: g.sha[:8] for g in lock.git} == {"megatron-deepspeed": "e4bac701", "apex": "6424da3b"}
    given = {p.name for p in lock.packages if p.source == "preinstalled"}
    assert {"torch", "numpy", "setuptools"} <= given  # the node's own: never packed, never installed


def test_published_pins_are_refused_on_cuda13_torch211_with_the_reason(tmp_path):
    text = (Path("envbuild/recipes/data") / f"{RECIPE}.yaml").read_text()
    text = text.replace('version: "0.18.9"', 'version: "0.10.3"').replace(
        "sha: 6424da3b4faa6c8f062da4a48c424fff3f02d42d", "sha: 52e18c894223800cb611682dce27d88050edf1de")
    published = tmp_path / "published.yaml"
    published.write_text(text)
    target, facts = h100_node()
    verdict = preflight(load_recipe(str(published)), target, facts)
    rows = {v.rule: v.message for v in verdict.violations if v.severity == "error"}
    assert not verdict.feasible
    assert "sm_70" in rows["apex-cuda13-sm70"] and "13.0" in rows["apex-cuda13-sm70"]
    assert "_get_socket_with_port" in rows["deepspeed-elastic-agent-torch24"]
    assert "2.11.0" in rows["deepspeed-elastic-agent-torch24"]
    deviations = {d.id for d in load_recipe(RECIPE).deviations}
    assert {"apex-52e18c89-cuda13", "deepspeed-0.10.3-torch-2.4"} <= deviations


def test_the_rows_stay_quiet_where_the_pins_were_published():
    """On Polaris (nvcc 11.8, torch 2.0.1) nothing of this fires."""
    target = load_target("polaris")
    from envbuild.facts.profile import from_target

    verdict = preflight(load_recipe("polaris-megatron-deepspeed"), target, from_target(target))
    assert not {"apex-cuda13-sm70", "deepspeed-elastic-agent-torch24"} & {v.rule for v in verdict.violations}


def test_plan_builds_apex_and_fused_adam_for_sm90_offline():
    from envbuild.actions.steps import BASE_SITE_PTH, actions
    from envbuild.lock.check import check_lock_file
    from envbuild.plan.build import PlanOptions
    from envbuild.plan.params import BundleParams
    from envbuild.plan.resolve import resolve

    target, facts = h100_node()
    recipe = load_recipe(RECIPE)
    lock = check_lock_file(SHIPPED_LOCKDIR / RECIPE / "h100-venv.lock", recipe, target)
    staged = BundleParams(digest="0" * 64, src="/ctl/bundle/node", files=[],
                          git={s.url: f"git/{s.name}.git" for s in recipe.sources})
    plan = resolve(recipe, target, facts, lock, PlanOptions(prefix="/opt/envs/md", bundle=staged)).plan
    steps = {s.id: s for s in plan.steps}
    assert [s.id for s in plan.steps][:3] == ["preflight", "bundle", "environment"]
    apex = steps["apex:apex"].params
    assert apex.env["TORCH_CUDA_ARCH_LIST"] == "9.0"
    assert int(apex.env["APEX_PARALLEL_BUILD"]) > 1 and apex.env["APEX_CUDA_EXT"] == "1"
    ds = steps["pip:packages"].params
    assert "deepspeed" in ds.no_build_isolation and ds.env["DS_BUILD_FUSED_ADAM"] == "1"
    assert ds.env["TORCH_CUDA_ARCH_LIST"] == "9.0" and ds.no_index
    assert steps["pip-tooling"].params.no_index
    for sid in ("git:megatron-deepspeed", "git:apex"):
        assert steps[sid].params.fetch_url.startswith("/opt/envs/md/.envbuild/bundle/git/")
    env = steps["environment"]
    assert env.params.system_site_packages and env.params.interpreter == "/opt/torch/.venv/bin/python"
    assert any(getattr(a, "argv", [None])[-2:] == [BASE_SITE_PTH, "/opt/envs/md"] for a in actions(env, plan.prefix))
    assert "torch" not in {r.name for s in plan.pip_installs() for r in s.params.requirements}


@pytest.mark.process
def test_venv_over_a_venv_interpreter_sees_that_venvs_packages(tmp_path):
    """The H100's python3 is a venv's (/opt/torch/.venv): a --system-site-packages venv made from
    it alone would not see torch. This test's own interpreter is a venv's too (pydantic in it)."""
    from envbuild.node.actions import run_actions
    from envbuild.actions.steps import actions
    from envbuild.plan.model import Step
    from envbuild.plan.params import EnvironmentParams

    assert sys.prefix != sys.base_prefix, "runs from envbuild's own venv"
    prefix = str(tmp_path / "env")
    step = Step(id="environment", title="env", params=EnvironmentParams(
        backend="venv", prefix=prefix, python="3", interpreter=sys.executable, system_site_packages=True))
    run_actions([a.model_dump(mode="json") for a in actions(step, prefix)])
    r = subprocess.run([f"{prefix}/bin/python", "-c", "import pydantic, sys; print(json.dumps(sys.path))"
                        .replace("json.dumps", "__import__('json').dumps")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    path = json.loads(r.stdout)
    ours = next(i for i, p in enumerate(path) if p.startswith(prefix))
    base = path.index(next(p for p in path if p.startswith(sys.prefix) and p.endswith("site-packages")))
    assert ours < base  # the new venv's own packages shadow the base venv's


SAMPLE_IDX = DATA / "megatron_ds_e4bac701_gpt_dataset_sample_idx.py.txt"


@pytest.mark.parametrize("patch_id,excerpt", [("wandb-optional", HEAD), ("ezpz-offline", HEAD),
                                              ("sample-idx-python", SAMPLE_IDX)])
def test_patches_apply_to_the_pinned_text_once(patch_id, excerpt):
    from envbuild.node.textpatch import apply_text_patch

    p = next(x for x in load_recipe(RECIPE).patches if x.id == patch_id)
    text = excerpt.read_text()
    status, after = apply_text_patch(text, p.kind, p.old, p.new, p.count)
    assert status == "applied" and after != text
    again, same = apply_text_patch(after, p.kind, p.old, p.new, p.count)
    assert again == "already-applied" and same == after
    if patch_id == "wandb-optional":  # deviation ezpz-wandb-offline: W&B off in the env file the run sources
        from envbuild.plan.build import build_plan

        target, facts = h100_node()
        env = build_plan(load_recipe(RECIPE), target, facts).env_file()
        assert env.params.vars["WANDB_MODE"] == "disabled"
    if excerpt is HEAD:
        compile(after.split("\n", 2)[2], "pretrain_gpt.py", "exec")  # still Python
    else:
        body = "\n".join(line[8:] for line in after.split("\n")[2:])  # the block, dedented
        compile("if True:\n" + "\n".join("    " + x for x in body.splitlines()), "gpt_dataset.py", "exec")
        assert "helpers.build_sample_idx" not in after and "_build_sample_idx(sizes, doc_idx" in after


def test_the_benchmark_runs_what_the_deviations_say():
    """flash-attn-v2-not-built, fused-softmax-sm70, single-gpu-synthetic, bf16-not-fp16,
    no-activation-checkpointing, optimizer-on-gpu, data-parallel-not-tensor-parallel: the
    command carries them."""
    from envbuild.plan.smoke import native_run

    recipe = load_recipe(RECIPE)
    run = native_run(recipe.benchmark.model_dump(mode="json"), gpus=1,
                     sources={"megatron-deepspeed": "/e/src/megatron-deepspeed"}, cwd="/e/smoke")
    cmd = run["argv"][-1]
    assert run["cwd"] == "/e/src/megatron-deepspeed"
    assert "--use-flash-attn" not in cmd and "--no-masked-softmax-fusion" in cmd
    # one data-parallel rank per GPU of the node, the global batch (Megatron's and DeepSpeed's)
    # 16 per rank: the one-GPU run of the H100 and the two-rank run of an H200 pair
    assert 'NGPU=$(python -c "import torch; print(max(1, torch.cuda.device_count()))")' in cmd
    assert "GBS=$((16 * NGPU))" in cmd and "--global-batch-size \"$GBS\"" in cmd
    assert "python -m torch.distributed.run --standalone --nproc_per_node \"$NGPU\" pretrain_gpt.py" in cmd
    assert "--tokenizer-type NullTokenizer" in cmd and "make_builder" in cmd  # synthetic tokens
    # sequence 2048 x batch 16 ran out of the H100's 80 GB with the unfused softmax (run 2)
    assert "--seq-length 1024" in cmd and "--micro-batch-size 16" in cmd
    assert run["env"] == {"PYTHONFAULTHANDLER": "1", "PYTHONUNBUFFERED": "1"}  # a crash keeps its stack
    # where ALCF/args.sh (e4bac701) differs, each a deviation: bf16, not fp16; no activation
    # checkpointing; the optimizer on the GPU; data parallel at tensor parallel 1
    assert "--bf16" in cmd and '"bf16": {"enabled": true}' in cmd and "fp16" not in cmd
    assert "checkpoint-activations" not in cmd and "--checkpoint-num-layers" not in cmd
    assert "offload" not in cmd and "--cpu-optimizer" not in cmd and "--zero-stage 1" in cmd
    assert "--tensor-model-parallel-size" not in cmd and "--sequence-parallel" not in cmd
    assert native_run(recipe.benchmark.model_dump(mode="json"), gpus=0, sources={}, cwd="/e")["skip"]


def test_every_deviation_names_its_code_and_test():
    import importlib

    for dev in load_recipe(RECIPE).deviations:
        assert dev.handled_by and dev.test, dev.id
        for ref in dev.handled_by:
            module, _, attr = ref.partition(":")
            assert getattr(importlib.import_module(module), attr)
        for node in dev.test:
            path, _, name = node.partition("::")
            assert Path(path).name == Path(__file__).name and name in globals(), node
