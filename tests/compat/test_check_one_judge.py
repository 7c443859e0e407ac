"""One judgement of feasibility (issue 49): `check`, `plan` and `render`'s preflight read the
node's torch once and judge with one rule set.

- The CUDA of a torch the recipe does not tag (the node's own torch 2.11.0, the PyPI build, whose
  table row says cu130) is what `check` prints and what the plan's Apex decision takes: the plan
  refused the Apex patch as "torch is a CPU build" while `check` said CUDA 13 and FEASIBLE.
- `plan` exits 1 when it refuses a step the recipe needs, as `check` exits 1 when infeasible.
- For every shipped recipe and target, `check` (the target's profile), `plan` and `render`'s image
  preflight agree; an image planned for a target counts that target's GPUs as `check` does.
- An image whose plan builds CUDA code starts from a CUDA devel image of torch's CUDA, chosen from
  the same reading, never from a CPU Python image.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from support.clirun import envbuild

from envbuild.compat.context import pick_torch
from envbuild.facts.profile import from_target
from envbuild.inputs import find_lock, node_facts
from envbuild.plan.image import image_plan
from envbuild.plan.resolve import check_facts
from envbuild.recipes import all_recipes, load_recipe
from envbuild.shipped import RECIPES
from envbuild.targets import load_target
from envbuild.versions import vtuple

PAIRS = [(r.name, t) for r in all_recipes() for t in r.targets if not load_target(t).from_facts]


@pytest.fixture
def users_recipe(tmp_path: Path) -> Path:
    """A setup of one's own on the H100 node's torch (preinstalled 2.11.0, no CUDA tag), whose
    Apex is built with --cuda_ext and carries an apex-cuda-check patch (GPT-NeoX's shape)."""
    data = yaml.safe_load((RECIPES / "megatronapp-h100.yaml").read_text())
    data.update(name="my-neox", default=False)
    data["patches"].append({"id": "apex-cuda-check", "kind": "apex-cuda-check", "component": "apex",
                            "why": "relax Apex's exact CUDA match"})
    path = tmp_path / "my-neox.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_check_and_the_plans_apex_decision_read_one_torch(users_recipe: Path) -> None:
    check = envbuild("check", users_recipe, "--target", "h100-venv", "--json")
    assert check.returncode == 0, check.stderr
    verdict = json.loads(check.stdout)
    assert verdict["feasible"] and verdict["torch_variant"] == "2.11.0+cu130"
    plan = envbuild("plan", users_recipe, "--target", "h100-venv", "--json")
    assert plan.returncode == 0, plan.stderr
    decisions = {d["subject"]: d for d in json.loads(plan.stdout)["decisions"]}
    apex = decisions["patch:apex-cuda-check"]
    assert apex["outcome"] == "unchanged", apex  # was: refused, "torch is a CPU build"
    assert "torch's CUDA 13.0" in apex["reason"] and "CPU build" not in apex["reason"]
    assert "patch:apex-cuda-check" not in [s["id"] for s in json.loads(plan.stdout)["steps"]]  # as published


def test_plan_exits_1_when_it_refuses_a_step_the_recipe_needs(users_recipe: Path, tmp_path: Path) -> None:
    """The node builds the image (podman, 4 GPUs: its own preflight passes) from a base without a
    CUDA toolkit: the image's Apex patch is refused there, so the plan exits 1 naming it."""
    facts = from_target(load_target("h100-venv"))
    facts = facts.model_copy(update={"host": "node1", "origin": "collected", "gpus": facts.gpus * 4,
                                     "container_engines": {"podman": "4.9.3"}})
    (tmp_path / "facts.json").write_text(facts.to_json())
    argv = ["plan", users_recipe, "--target", "h100-venv", "--facts", tmp_path / "facts.json",
            "--backend", "container", "--base", "python:3.12-slim-bookworm"]
    p = envbuild(*argv)
    assert p.returncode == 1, p.stderr
    assert "preflight: feasible" in p.stdout  # the node itself is fine
    assert ("error: node1: patch:apex-cuda-check refused: CUDA extensions requested but no nvcc "
            "was found") in p.stderr
    # the image render says no for the same reason (its exit: 1 when not feasible)
    from envbuild.render.formats import render

    r = render("dockerfile", load_recipe(users_recipe), load_target("h100-venv"), None,
               base="python:3.12-slim-bookworm")
    assert not r.feasible and "patch:apex-cuda-check refused: CUDA extensions requested" in r.summary


@pytest.mark.parametrize("recipe,target", PAIRS)
def test_check_plan_and_render_give_one_answer(recipe: str, target: str) -> None:
    rec, tgt = load_recipe(recipe), load_target(target)
    lock = find_lock(rec, tgt)
    _, checked = check_facts(rec, tgt, node_facts(tgt)[0])
    from envbuild.plan.build import PlanOptions
    from envbuild.plan.resolve import resolve

    planned = resolve(rec, tgt, node_facts(tgt)[0], lock, PlanOptions())
    image = image_plan(rec, tgt, lock)
    assert planned.feasible == checked.feasible
    assert image.feasible == checked.feasible, (checked.summary(), image.plan.steps[0].params.errors)
    if checked.feasible:  # a feasible node: no step of its plans refused either
        assert not image.plan.refused() and not planned.plan.refused()


def test_render_passes_what_check_passes_on_a_target_lent_with_more_gpus(tmp_path: Path) -> None:
    """megatron-deepspeed-slurm-h100 needs 2 GPUs; h100-venv's profile has 1 and is lent with up
    to 8: `check` said FEASIBLE and `render` refused "too-few-gpus ... image has 1"."""
    c = envbuild("check", "megatron-deepspeed-slurm-h100", "--target", "h100-venv")
    r = envbuild("render", "megatron-deepspeed-slurm-h100", "--target", "h100-venv", "--format", "dockerfile",
                 "-o", tmp_path / "ctx")
    assert c.returncode == 0 and "FEASIBLE" in c.stdout, c.stdout + c.stderr
    assert r.returncode == 0 and "too-few-gpus" not in r.stdout + r.stderr, r.stdout + r.stderr


def test_an_image_that_builds_cuda_code_starts_from_torchs_cuda() -> None:
    """The base image comes from the torch reading that plans the CUDA build steps: an Apex
    --cuda_ext build gets a base with nvcc of torch's CUDA major (the -h100 recipes got the CPU
    image python:3.12-slim-bookworm)."""
    built = []
    for recipe, target in PAIRS:
        rec, tgt = load_recipe(recipe), load_target(target)
        image = image_plan(rec, tgt, find_lock(rec, tgt))
        if not any("--cuda_ext" in s.params.options for s in image.plan.apex_builds()):
            continue
        built.append(recipe)
        pick = pick_torch(rec, check_facts(rec, tgt, node_facts(tgt)[0])[0])  # what `check` prints
        assert image.base.nvcc is not None, (recipe, target, image.base.image)
        assert pick is not None and pick.cuda is not None, recipe
        assert vtuple(image.base.nvcc)[0] == vtuple(pick.cuda)[0], (recipe, target, image.base.image, pick.label)
    assert {"alpa-megatron-h100", "megatronapp-h100", "h100-megatron-deepspeed"} <= set(built), built


def test_the_h100_dockerfile_is_a_cuda_13_devel_image(tmp_path: Path) -> None:
    r = envbuild("render", "alpa-megatron-h100", "--target", "h100-venv", "--format", "dockerfile",
                 "-o", tmp_path / "ctx")
    assert r.returncode == 0, r.stderr
    first = next(line for line in (tmp_path / "ctx" / "Dockerfile").read_text().splitlines()
                 if line.startswith("FROM "))
    assert first == "FROM nvidia/cuda:13.0.0-cudnn-devel-ubuntu24.04 AS env"
