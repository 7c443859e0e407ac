"""``envbuild check`` end to end through the CLI (in-process, tests/support/clirun.py): exit codes, JSON, errors."""

from __future__ import annotations

import json
import os
import subprocess

from support.clirun import envbuild
from support.paths import DATA, ROOT

RECIPE = str(DATA / "compat" / "baseline-recipe.yaml")
TARGET = str(DATA / "compat" / "a100-node.yaml")


def run(*args: str) -> subprocess.CompletedProcess:
    return envbuild(*args, cwd=ROOT, env={**os.environ, "COLUMNS": "200"})


def test_feasible_exits_zero_with_verdict_line():
    p = run("check", RECIPE, "--target", TARGET)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("FEASIBLE: baseline on a100-node")


def test_a_verdict_from_the_profile_says_it_judged_no_node():
    p = run("check", RECIPE, "--target", TARGET)
    assert "judged: the target profile's documented facts (a100-node), not a node; pass --facts FILE" in p.stdout
    q = run("check", RECIPE, "-t", TARGET, "--facts", str(DATA / "facts" / "h100-node.json"))
    assert "judged: the target profile" not in q.stdout


def test_json_verdict_from_profile():
    p = run("check", RECIPE, "-t", TARGET, "--json")
    assert p.returncode == 0, p.stderr
    v = json.loads(p.stdout)
    assert v["feasible"] is True and v["torch_variant"] == "2.0.1+cu118" and v["origin"] == "profile:a100-node"
    assert v["violations"] == [] and "wheel-lacks-gpu-arch" in v["passed"]


def test_infeasible_prints_every_violation_then_exits_one():
    # the H100 facts: sm_90, nvcc 13.0, Python 3.12 only -> several rows at once
    p = run("check", RECIPE, "-t", TARGET, "--facts", str(DATA / "facts" / "h100-node.json"))
    assert p.returncode == 1
    assert p.stdout.startswith("INFEASIBLE: baseline on a100-node (h100-node")
    for rule in ("nvcc-major-mismatch", "python-absent"):
        assert rule in p.stdout
    assert p.stderr.startswith("error: baseline is infeasible on a100-node")
    assert "hint:" in p.stderr and "Traceback" not in p.stderr


def test_facts_list_checks_every_node_and_json_is_a_list():
    p = run("check", RECIPE, "-t", TARGET, "--facts", str(DATA / "facts" / "nd96-pair.json"), "--json")
    assert p.returncode == 1  # nvcc 11.4 / 10.2 against the baseline's cu118 torch
    got = json.loads(p.stdout)
    assert [v["host"] for v in got] == ["nd96-a", "nd96-b"]
    rules_b = {x["rule"] for x in got[1]["violations"]}
    assert "nvcc-major-mismatch" in rules_b
    assert all(set(x) >= {"rule", "severity", "message", "why", "source", "fix"} for v in got for x in v["violations"])


def test_bad_inputs_exit_two_without_traceback(tmp_path):
    bad = tmp_path / "facts.json"
    bad.write_text("{not json")
    for args in (("check", RECIPE, "-t", TARGET, "--facts", str(bad)),
                 ("check", "no-such-recipe", "-t", TARGET),
                 ("check", RECIPE, "-t", "no-such-target"),
                 ("check", RECIPE, "-t", TARGET, "--facts", str(tmp_path / "absent.json"))):
        p = run(*args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert p.stderr.startswith("error: ") and "hint: " in p.stderr and "Traceback" not in p.stderr


def test_facts_of_wrong_schema_exit_two(tmp_path):
    bad = tmp_path / "facts.json"
    bad.write_text(json.dumps({"schema": "envbuild.facts/1", "host": "x", "gpus": "eight"}))
    p = run("check", RECIPE, "-t", TARGET, "--facts", str(bad))
    assert p.returncode == 2 and "gpus" in p.stderr


def test_local_target_without_facts_gathers_this_machine():
    p = run("check", str(DATA / "compat" / "baseline-recipe.yaml"), "-t", "local", "--json")
    assert p.returncode in (0, 1), p.stderr
    v = json.loads(p.stdout)
    assert v["target"] == "local" and v["origin"] == "collected"
    assert len(v["passed"]) + len(v["violations"]) > 30


def test_plan_of_an_infeasible_node_prints_the_plan_and_exits_one_as_check_does():
    facts = str(DATA / "facts" / "h100-node.json")
    for extra in ([], ["--json"]):
        p = run("plan", RECIPE, "-t", TARGET, "--facts", facts, *extra)
        assert p.returncode == 1, p.stderr
        assert "infeasible on" in p.stderr and "hint: envbuild check" in p.stderr
        if extra:
            assert json.loads(p.stdout)["steps"][0]["params"]["feasible"] is False
        else:
            assert "preflight: INFEASIBLE" in p.stdout
    assert run("plan", RECIPE, "-t", TARGET).returncode == 0  # feasible: 0
