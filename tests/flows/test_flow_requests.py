"""``plan``, ``provision`` and ``launch`` as their flows (envbuild/flows/plan.py, provision.py,
launch.py): the request's checks refuse options that need another one before anything runs
(exit 2, the option named), and the plan flow's outcome is what the command prints."""

from __future__ import annotations

import json
import os
import shlex

import pytest
from support.clirun import envbuild

from envbuild.flows.plan import INFEASIBLE, PlanRequest, plan
from support.paths import DATA

RECIPE = str(DATA / "compat" / "baseline-recipe.yaml")
TARGET = str(DATA / "compat" / "a100-node.yaml")
H100_FACTS = str(DATA / "facts" / "h100-node.json")


def test_plan_flow_says_who_refuses_and_the_check_command_names_the_files_as_given() -> None:
    res = plan(PlanRequest(target=TARGET, recipe=RECIPE, facts_file=H100_FACTS))
    assert res.exit_code == INFEASIBLE and res.infeasible == [p.host for p in res.plans] and res.recipe == "baseline"
    assert res.check_command == f"envbuild check {shlex.quote(RECIPE)} --target {shlex.quote(TARGET)}"
    p = envbuild("plan", RECIPE, "-t", TARGET, "--facts", H100_FACTS, "--json")
    assert p.returncode == res.exit_code
    assert json.loads(p.stdout) == res.plans[0].model_dump(mode="json", by_alias=True)
    assert f"hint: {res.check_command} lists every violated rule" in p.stderr
    ok = plan(PlanRequest(target=TARGET, recipe=RECIPE))  # the profile's facts: feasible
    assert ok.exit_code == 0 and not ok.infeasible and not ok.refused


@pytest.mark.parametrize("extra,words", [
    (["--trusted-key", "key.pub"], "--trusted-key and --provenance check a --bundle; none was given"),
    (["--provenance", "b.intoto.jsonl"], "--trusted-key and --provenance check a --bundle; none was given"),
    (["--node-identity", "/home/u/.ssh/id"], "--node-identity logs one node in to the next for --fanout"),
    (["--fanout", "2", "--no-push-wheels"], "--fanout sends the pushed wheels down a tree; --no-push-wheels"),
])
def test_provision_refuses_an_option_without_the_one_it_needs_before_anything_runs(extra, words, tmp_path) -> None:
    home = tmp_path / "home"
    p = envbuild("provision", "cpu-reference", "-t", "local", "--prefix", str(tmp_path / "env"), *extra,
                 env={**os.environ, "ENVBUILD_HOME": str(home)})
    assert p.returncode == 2, p.stderr
    assert p.stderr.startswith(f"error: {words}") and "hint: " in p.stderr and "Traceback" not in p.stderr
    assert not home.exists()  # no run directory, no node read


def test_provision_refuses_two_different_recipes() -> None:
    p = envbuild("provision", "cpu-reference", "--recipe", "alpa-megatron", "-t", "local")
    assert p.returncode == 2 and "two recipes given: cpu-reference (argument) and alpa-megatron (--recipe)" in p.stderr


def test_launch_refuses_pack_options_without_a_pack(tmp_path) -> None:
    key = tmp_path / "key.pub"
    key.write_text("not read: refused before\n")
    out = tmp_path / "job.sbatch"
    base = ["launch", "cpu-reference", "-t", "slurm", "--scheduler", "slurm", "-o", str(out)]
    p = envbuild(*base, "--fanout", "2")
    assert p.returncode == 2 and "--fanout is the fan-out of the pack's sbcast; there is no --packed" in p.stderr
    p = envbuild(*base, "--trusted-key", str(key))
    assert p.returncode == 2 and "--trusted-key checks the signature of a --packed pack; none was given" in p.stderr
    assert not out.exists()  # refused before the file is written
    assert envbuild(*base).returncode == 0 and out.read_text().startswith("#!")
