"""A recipe declares how its benchmark's log is read (``parser: declared`` and ``log:``), and
envbuild judges a setup it does not ship with no edit of its own: here GPT-NeoX's log, written
in the format its printing code uses (EleutherAI/gpt-neox 018b8a9 megatron/logging.py
``training_log``: `` samples/sec: {:.3f} | iteration {:8d}/{:8d} | ... lm_loss: {:.6E} |``;
megatron/neox_arguments/arguments.py ``configure_distributed_args``: ``NeoXArgs.configure_distributed_args()
using world size: {} and model-parallel size: {} ``, rank 0, once per launch). A reader an
installed package registers under the entry point group ``envbuild.parsers`` is used the same
way. Unknown readers and patterns that are not linear-time are refused when the recipe loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from envbuild.shipped import RECIPES

NEOX_RULES = {
    "metrics": {
        "samples_per_second": {"regex": r"samples/sec: (?P<value>[0-9.]+) \|",
                               "source": "EleutherAI/gpt-neox 018b8a9 megatron/logging.py training_log"},
    },
    "progress": {"regex": r"\biteration\s+(?P<step>\d+)\s*/\s*(?P<planned>\d+) \|",
                 "source": "EleutherAI/gpt-neox 018b8a9 megatron/logging.py training_log"},
    "start": {"regex": r"^NeoXArgs\.configure_distributed_args\(\) using world size",
              "source": "EleutherAI/gpt-neox megatron/neox_arguments/arguments.py configure_distributed_args"},
    "gpus": {"regex": r"^NeoXArgs\.configure_distributed_args\(\) using world size: (?P<gpus>\d+)\b",
             "source": "EleutherAI/gpt-neox megatron/neox_arguments/arguments.py configure_distributed_args"},
    "diverged": [{"regex": r"lm_loss: (?i:nan|-?inf)\b", "what": "a non-finite lm_loss",
                  "source": "EleutherAI/gpt-neox 018b8a9 megatron/logging.py training_log"},
                 {"regex": r"number of nan iterations:\s*[1-9]", "what": "NaN iterations counted",
                  "source": "EleutherAI/gpt-neox 018b8a9 megatron/logging.py training_log"}],
}


def recipe_file(tmp_path: Path, parser: str = "declared", log: dict | None = None, **bench) -> Path:
    data = yaml.safe_load((RECIPES / "cpu-reference.yaml").read_text())
    data.pop("default", None)
    data["name"] = "gpt-neox-125m"
    data["benchmark"] = {"command": "python ./deepy.py train.py configs/125M.yml", "parser": parser,
                         "metric": "samples_per_second", "unit": "samples/s", "window": {"warmup": 1, "what": "x"},
                         **bench}
    if log is not None:
        data["benchmark"]["log"] = log
    path = tmp_path / "gpt-neox-125m.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def neox_run(gpus: int, iters: int, planned: int, sps: float = 62.5, nan_from: int | None = None) -> str:
    """A GPT-NeoX run's output, each line as the printing code formats it (log_interval 10)."""
    out = [f"NeoXArgs.configure_distributed_args() using world size: {gpus} and model-parallel size: 1 "]
    for it in range(10, iters + 1, 10):
        loss = float("nan") if nan_from is not None and it >= nan_from else 10.5 - it / 100
        line = " samples/sec: {:.3f} |".format(sps * (0.9 if it == 10 else 1.0))
        line += " iteration {:8d}/{:8d} |".format(it, planned)
        line += " elapsed time per iteration (ms): {:.1f} |".format(1000 * 16 / sps)
        line += " learning rate: {:.3E} |".format(6e-4)
        line += " approx flops per GPU: 35.6TFLOPS |"
        line += " {}: {:.6E} |".format("lm_loss", loss)
        line += " number of skipped iterations: {:3d} |".format(0)
        line += " number of nan iterations: {:3d} |".format(0)
        out.append(line)
    return "\n".join(out) + "\n"


def parse(recipe: Path, log: Path, *args: str) -> tuple[int, dict]:
    got = subprocess.run([sys.executable, "-m", "envbuild", "parse", str(recipe), str(log), "--json", *args],
                         capture_output=True, text=True, timeout=120)
    assert "Traceback" not in got.stderr, got.stderr
    return got.returncode, json.loads(got.stdout) if got.stdout.strip() else {"stderr": got.stderr}


CASES = [
    # (case, log, threshold, expected verdict, what the reason or completion says)
    ("complete", neox_run(1, 100, 100), 55.0, "PASS", "meets the threshold"),
    ("stopped", neox_run(1, 60, 100), 55.0, "FAIL", "the last logged step is 60 of 100"),
    ("diverged", neox_run(1, 100, 100, nan_from=50), 55.0, "FAIL", "a non-finite lm_loss"),
    ("two-runs", neox_run(1, 100, 100) + neox_run(2, 30, 100), 55.0, "FAIL", "run 2 of 2"),
    ("slow", neox_run(1, 100, 100, sps=40.0), 55.0, "FAIL", "misses the threshold"),
]


@pytest.mark.parametrize("case,text,threshold,verdict,says", CASES, ids=[c[0] for c in CASES])
def test_a_declared_reader_judges_gpt_neox_logs(tmp_path, case, text, threshold, verdict, says):
    recipe = recipe_file(tmp_path, log=NEOX_RULES, threshold=threshold)
    log = tmp_path / "train.log"
    log.write_text(text)
    rc, out = parse(recipe, log, "--gpu", "NVIDIA H100 80GB HBM3")
    assert out["verdict"] == verdict and says in out["reason"], out
    assert rc == {"PASS": 0, "FAIL": 1}[verdict]
    if case == "complete":
        # the mean after the window's warm-up (the first interval, 90 % of the rest, left out)
        assert out["value"] == pytest.approx(62.5) and out["window"]["n"] == 9 and out["gpus"] == 1
    if case == "two-runs":
        assert out["completion"]["runs"] == 2 and out["gpus"] == 2  # the judged run's own count


def test_the_log_prints_its_gpu_count_and_a_given_one_that_differs_is_said(tmp_path):
    recipe = recipe_file(tmp_path, log=NEOX_RULES, threshold=55.0)
    log = tmp_path / "train.log"
    log.write_text(neox_run(8, 100, 100))
    _, out = parse(recipe, log)
    assert out["gpus"] == 8
    _, given = parse(recipe, log, "--gpus", "4")
    assert given["gpus"] == 4 and "the log prints 8 GPUs" in given["reason"], given["reason"]
    assert "--gpus says 4: judged as 4" in given["reason"]


def test_explain_names_the_rule_that_read_each_line(tmp_path):
    recipe = recipe_file(tmp_path, log=NEOX_RULES, threshold=55.0)
    log = tmp_path / "train.log"
    log.write_text(neox_run(1, 30, 100))
    got = subprocess.run([sys.executable, "-m", "envbuild", "parse", str(recipe), str(log), "--explain"],
                         capture_output=True, text=True, timeout=120)
    lines = got.stdout.splitlines()
    assert any("line 1: start read matched" in x for x in lines), got.stdout
    assert any('line 1: gpus read {"gpus": "1"}' in x for x in lines)
    assert any('line 4: metrics.samples_per_second read {"value": "62.500"}' in x for x in lines)
    assert any('line 4: progress read {"planned": "100", "step": "30"}' in x for x in lines)


def test_an_unknown_parser_is_refused_where_the_recipe_is_read_with_the_close_names(tmp_path):
    recipe = recipe_file(tmp_path, parser="megatron-deepsped")
    for command in (["show", str(recipe)], ["check", str(recipe), "--target", "local"],
                    ["plan", str(recipe), "--target", "local"]):
        got = subprocess.run([sys.executable, "-m", "envbuild", *command], capture_output=True, text=True,
                             timeout=120)
        assert got.returncode == 2, (command, got.stdout, got.stderr)
        assert "unknown parser 'megatron-deepsped'" in got.stderr and "did you mean 'megatron-deepspeed'" in got.stderr
        assert f"{recipe}:" in got.stderr and "Traceback" not in got.stderr


@pytest.mark.parametrize("rules,says", [
    ({**NEOX_RULES, "metrics": {"samples_per_second": {"regex": r"(a+)\1 (?P<value>\d+)", "source": "x"}}},
     "not a linear-time pattern"),
    ({**NEOX_RULES, "metrics": {"samples_per_second": {"regex": r"samples/sec: ([0-9.]+)", "source": "x"}}},
     "no named group (?P<value>...)"),
    ({**NEOX_RULES, "metrics": {"tokens": NEOX_RULES["metrics"]["samples_per_second"]}},
     "is not one of log.metrics"),
])
def test_a_declared_rule_that_cannot_run_is_refused_at_load(tmp_path, rules, says):
    recipe = recipe_file(tmp_path, log=rules)
    got = subprocess.run([sys.executable, "-m", "envbuild", "show", str(recipe)], capture_output=True, text=True,
                         timeout=120)
    assert got.returncode == 2 and says in got.stderr and f"{recipe}:" in got.stderr, got.stderr
    assert "Traceback" not in got.stderr and "re2.cc" not in got.stderr


PLUGIN = '''
import re

def parse(text, *, warmup):
    values = [float(v) for v in re.findall(r"tokens/s=([0-9.]+)", text)][warmup:]
    return {"tokens_per_second": sum(values) / len(values)} if values else {}

def completion(text, *, planned):
    return ("complete", "the done line was printed") if "done." in text else ("stopped", "no done line")
'''


def test_a_reader_registered_by_an_installed_package_is_used_with_no_edit_of_envbuild(tmp_path):
    site = tmp_path / "site"
    (site / "neoxreader-1.0.dist-info").mkdir(parents=True)
    (site / "neoxreader.py").write_text(PLUGIN)
    (site / "neoxreader-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: neoxreader\nVersion: 1.0\n")
    (site / "neoxreader-1.0.dist-info" / "entry_points.txt").write_text("[envbuild.parsers]\nneox-tokens = neoxreader\n")
    recipe = recipe_file(tmp_path, parser="neox-tokens", threshold=90.0)
    data = yaml.safe_load(recipe.read_text())
    data["benchmark"]["metric"] = "tokens_per_second"
    recipe.write_text(yaml.safe_dump(data, sort_keys=False))
    log = tmp_path / "run.log"
    log.write_text("tokens/s=50\ntokens/s=100\ntokens/s=102\ndone.\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    got = subprocess.run([sys.executable, "-m", "envbuild", "parse", str(recipe), str(log), "--json"],
                         capture_output=True, text=True, timeout=120, env=env)
    out = json.loads(got.stdout)
    assert got.returncode == 0 and out["verdict"] == "PASS" and out["value"] == pytest.approx(101.0), got.stderr
    # without the package installed, the same recipe is refused when read
    bare = subprocess.run([sys.executable, "-m", "envbuild", "show", str(recipe)], capture_output=True, text=True,
                          timeout=120)
    assert bare.returncode == 2 and "unknown parser 'neox-tokens'" in bare.stderr


def test_the_builtin_reader_names_match_the_shipped_readers():
    from envbuild.recipes.logspec import BUILTIN
    from envbuild.smoke.native import NATIVE_PARSERS

    assert tuple(sorted(NATIVE_PARSERS)) == BUILTIN
