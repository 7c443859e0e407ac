"""The corpus of native logs in each shipped recipe's real printed format (tests/data/native_logs/
cases.yaml, written by write_corpus.py from the printing code each row names): every case's
completion state, run count, metric and window values, and its verdict through ``envbuild parse``.

0 wrong verdicts: each row is judged on its GPU model and count (``gpu``), as ``envbuild parse
--gpu MODEL --gpus N`` does, or on what ``given`` passes (None: nothing, the judge reads the
log's own count and model); a row whose verdict depends on the GPU (``gpu_dependent``) also says
what a GPU-blind judge said (``verdict_now``), which the one judge no longer says. The reason
holds each of the row's ``says``, "run N of N" for a file of N runs, and the value shown is the
judged (last) run's figure.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
from pathlib import Path

import pytest
import yaml

from envbuild.cli import main
from envbuild.recipes import load_recipe, recipe_names
from envbuild.smoke.completion import completion
from envbuild.smoke.judge import measure
from envbuild.smoke.native import parse, split_runs
from envbuild.smoke.readers import reader
from support.paths import DATA

LOGS = DATA / "native_logs"
CASES = yaml.safe_load((LOGS / "cases.yaml").read_text())["cases"]


def ids(row: dict) -> str:
    return f"{row['recipe']}:{row['case']}"


def verdict_of(tmp_path: Path, recipe: str, log: Path, threshold, gpu: dict | None = None,
               given: dict | None = None) -> tuple[int, dict]:
    """(exit code, JSON result) of ``envbuild parse RECIPE LOG --json [--gpu MODEL --gpus N]``,
    with the recipe's threshold replaced where the row sets one."""
    rec = recipe
    if threshold != "as-shipped":
        data = load_recipe(recipe).model_dump(mode="json", by_alias=True)
        data["benchmark"]["threshold"] = threshold
        if threshold is None:  # a threshold's GPU goes with it
            data["benchmark"].pop("threshold_gpu", None)
            data["benchmark"].pop("threshold_gpus", None)
        path = tmp_path / f"{recipe}.yaml"
        path.write_text(yaml.safe_dump(data))
        rec = str(path)
    out = io.StringIO()
    model, count = (given["gpu"], given["gpus"]) if given else ((gpu or {}).get("model"), (gpu or {}).get("count"))
    with contextlib.redirect_stdout(out):
        rc = main(["parse", rec, str(log), "--json", *(["--gpu", model] if model else []),
                   *(["--gpus", str(count)] if count else [])])
    return rc, json.loads(out.getvalue())


@pytest.mark.parametrize("row", CASES, ids=ids)
def test_completion_and_runs(row):
    # the recipe's own reader: a built-in one by name, or the rules a recipe declares (nanogpt)
    done = reader(load_recipe(row["recipe"]).benchmark).completion((LOGS / row["file"]).read_text())
    assert (done.state, done.runs) == (row["state"], row["runs"]), done.detail
    if row["runs"] > 1:
        assert f"run {row['runs']} of {row['runs']}" in done.detail
    assert done.sources, "every rule names the printing code it reads"


@pytest.mark.parametrize("row", [r for r in CASES if "metric" in r], ids=ids)
def test_metric_and_window_come_from_the_last_run(row):
    bench = load_recipe(row["recipe"]).benchmark
    metrics = measure(bench, (LOGS / row["file"]).read_text())  # over the recipe's window, as the judge reads it
    assert metrics["runs"] == row["runs"]
    assert metrics[bench.metric] == pytest.approx(row["metric"], rel=1e-6)
    if "window" in row:
        assert metrics["values"][bench.metric] == pytest.approx(row["window"], rel=1e-6)
        assert len(row["window"]) == metrics.get("window", {}).get("used", len(row["window"]))


@pytest.mark.parametrize("row", CASES, ids=ids)
def test_verdict(row, tmp_path, capsys):
    rc, got = verdict_of(tmp_path, row["recipe"], LOGS / row["file"], row["threshold"], row.get("gpu"),
                         row.get("given"))
    want = row["verdict"]
    assert got["verdict"] == want, got["reason"]
    assert (rc == 0) == (want == "PASS")
    if row["state"] != "complete":
        assert got["verdict"] in ("FAIL", "NOTHING FOUND") and rc in (1, 2)
    for words in row.get("says", []):
        assert words in got["reason"], got["reason"]
    if row["runs"] > 1:  # the file's runs are said, and the figure shown is the judged (last) run's
        assert f"run {row['runs']} of {row['runs']}" in got["reason"], got["reason"]
    if "metric" in row and want != "NOTHING FOUND":
        assert got["value"] == pytest.approx(row["metric"], rel=1e-6)
    if row.get("given"):  # what --gpus gives wins; else the count the log prints
        assert got["gpus"] == (row["given"]["gpus"] or row["gpu"]["count"])
        assert got["gpu"] == (row["given"]["gpu"] or row["gpu"]["model"])


def test_every_shipped_recipe_with_a_benchmark_is_covered():
    shipped = {r for r in recipe_names() if load_recipe(r).benchmark is not None}
    by_recipe: dict[str, set] = {}
    for row in CASES:
        by_recipe.setdefault(row["recipe"], set()).add(row["state"])
    assert shipped <= set(by_recipe), f"no corpus rows for {sorted(shipped - set(by_recipe))}"
    for recipe, states in by_recipe.items():
        assert {"complete", "error"} <= states, recipe
        verdicts = {r.get("verdict") for r in CASES if r["recipe"] == recipe}
        assert {"PASS", "FAIL"} <= verdicts or recipe == "alpa-megatron", recipe
        assert any(r["runs"] > 1 for r in CASES if r["recipe"] == recipe), f"{recipe}: no two-run file"
    for outcome in ("diverged", "stopped"):
        missing = {r for r in by_recipe if outcome not in by_recipe[r]} - {"alpa-megatron", "alpa-megatron-h100",
                                                                           "cpu-reference"}
        assert not missing, f"no {outcome} case for {sorted(missing)}"


def test_every_row_cites_its_printing_code_and_gpu():
    for row in CASES:
        assert row["follows"] and all("@" in f or f.startswith("envbuild ") for f in row["follows"]), ids(row)
        if row["recipe"] != "cpu-reference":
            assert row["gpu"]["model"] and row["gpu"]["count"] >= 1, ids(row)
    assert any(r.get("gpu_dependent") for r in CASES)
    assert len({r["gpu"]["model"] for r in CASES if "gpu" in r}) >= 4


def test_overflow_skips_while_the_scale_settles_are_not_divergence():
    """MegatronApp's published run (no --initial-loss-scale: 2**32, hysteresis 2): 17 skipped
    iterations, then 3 that advance, complete; killed at 7 of 20, stopped (not diverged)."""
    text = (LOGS / "corpus/megatronapp/completed.log").read_text()
    skipped = [int(x) for x in re.findall(r"number of skipped iterations:\s+(\d+)", text)]
    assert sum(skipped) == 17 and len(skipped) == 20
    assert completion("megatronapp", text).complete
    killed = completion("megatronapp", (LOGS / "corpus/megatronapp/stopped-at-7-of-20.log").read_text())
    assert (killed.state, killed.reached, killed.planned) == ("stopped", 7, 20)


def test_deepspeed_signals_each_judge_a_run_diverged():
    """Each of DeepSpeed's own signals alone turns a completed Megatron-DeepSpeed log into a
    diverged one: the missing loss is tested by the corpus; here the others, one at a time."""
    text = (LOGS / "corpus/megatron-deepspeed-slurm/completed.log").read_text()
    assert completion("megatron-deepspeed", text).complete
    steps_nan = text.replace("0: steps: 20 loss: ", "0: steps: 20 loss: nan x", 1)
    grad_nan = text.replace("grad norm: ", "grad norm: nan | x: ", 1)
    at_min = text + "".join(
        f"0: [2026-11-22 13:30:0{i},000] [INFO] [stage_1_and_2.py:1651:step] [deepspeed] OVERFLOW! Rank 0 Skipping "
        "step. Attempted loss scale: 1, reducing to 1\n" for i in range(2))
    for variant in (steps_nan, grad_nan, at_min):
        assert variant != text
        assert completion("megatron-deepspeed", variant).state == "diverged"
    one = text + ("0: [2026-11-22 13:30:00,000] [INFO] [stage_1_and_2.py:1651:step] [deepspeed] OVERFLOW! Rank 0 "
                  "Skipping step. Attempted loss scale: 4096, reducing to 4096\n")
    assert completion("megatron-deepspeed", one).complete  # the hysteresis step keeps the scale once


def test_values_spread_is_finite_over_the_window():
    row = next(r for r in CASES if r["recipe"] == "h100-megatron-deepspeed" and r["case"] == "completed-met")
    metrics = parse("megatron-deepspeed", (LOGS / row["file"]).read_text())
    values = metrics["values"]["samples_per_second"]
    assert metrics["window"]["unit"] == "iteration" and metrics["window"]["first"] == 10
    assert all(math.isfinite(v) for v in values) and min(values) < max(values)
    assert sum(values) / len(values) == pytest.approx(metrics["samples_per_s"])


def test_text_after_the_last_end_line_stays_with_the_last_run():
    """A launcher that appends stderr after stdout (launch --submit) leaves warnings after the
    smoke record or Alpa's buffered echo: they belong to the last run, they are not a new one."""
    row = next(r for r in CASES if r["recipe"] == "cpu-reference" and r["case"] == "completed-met")
    record = (LOGS / row["file"]).read_text()
    warning = "\nUserWarning: Failed to initialize NumPy: No module named 'numpy'\n"
    assert split_runs("envbuild-smoke", record + warning) == [record + warning]
    assert parse("envbuild-smoke", record + warning)["mfu"] == pytest.approx(row["metric"])
    assert completion("envbuild-smoke", record + record + warning).runs == 2
    alpa = (LOGS / "corpus/alpa-megatron/completed.log").read_text()  # buffered: the echo comes last
    assert alpa.splitlines()[-1].startswith("python3 -m torch.distributed.launch")
    assert len(split_runs("alpa-benchmark", alpa + warning)) == 1
    assert completion("alpa-benchmark", alpa + warning).complete
