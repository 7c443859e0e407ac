"""``envbuild smoke --repeat N``: each number the median of N runs, every run's values kept,
and the report showing median, min and max."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.report import collect, render
from envbuild.smoke import SCHEMA, combine_runs, run_smoke
from support.paths import DATA

SAMPLE = DATA / "runs" / "20261122-073000-alpa-megatron-h100-ubuntu2404"


def fake_runner(numbers: dict[str, list[float]], fail_at: int | None = None):
    """A runner whose n-th run of each script prints the n-th of ``numbers``."""
    calls: dict[str, int] = {}

    def run(argv):
        kind = Path(argv[1]).stem
        kind = "apex" if kind == "apex_check" else kind
        i = calls[kind] = calls.get(kind, -1) + 1
        if kind == "apex":
            return 0, json.dumps({"schema": SCHEMA, "kind": "apex", "ok": True, "status": "skipped"}), ""
        if fail_at == i:
            return 1, "", "RuntimeError: boom"
        key = "tokens_per_s" if kind == "gpt" else "max_busbw_gbps"
        res = {"schema": SCHEMA, "kind": kind, "ok": True, key: numbers[kind][i], "run": i}
        if kind == "gpt":
            res.update(tflops=numbers[kind][i] / 1000, loss={"first": 8.0, "last": 6.0 - i})
        return 0, "noise\n" + json.dumps(res) + "\n", ""

    run.calls = calls
    return run


def test_repeat_takes_the_median_and_keeps_every_run():
    runner = fake_runner({"gpt": [300.0, 100.0, 200.0, 900.0, 250.0], "collective": [2.0, 1.0, 3.0, 4.0, 5.0]})
    res = run_smoke("py", ["gpt", "collective", "apex"], "tiny", runner, repeat=5)
    assert runner.calls == {"gpt": 4, "collective": 4, "apex": 0}  # apex has no number: once
    gpt = res["gpt"]
    assert gpt["tokens_per_s"] == 250.0 and gpt["tflops"] == 0.25
    assert gpt["run"] == 4 and gpt["loss"]["last"] == 2.0  # the other fields: the median run's
    assert gpt["repeat"] == {"n": 5, "values": {"tokens_per_s": [300.0, 100.0, 200.0, 900.0, 250.0],
                                                "tflops": [0.3, 0.1, 0.2, 0.9, 0.25]}, "ok": [True] * 5}
    assert res["collective"]["max_busbw_gbps"] == 3.0 and res["collective"]["ok"]
    assert "repeat" not in res["apex"]


def test_one_failed_run_makes_the_repeat_not_ok():
    res = run_smoke("py", ["gpt"], "tiny", fake_runner({"gpt": [1.0, 2.0, 3.0]}, fail_at=1), repeat=3)
    gpt = res["gpt"]
    assert gpt["ok"] is False and "boom" in gpt["error"]
    assert gpt["repeat"]["ok"] == [True, False, True] and gpt["repeat"]["values"]["tokens_per_s"] == [1.0, 3.0]
    assert gpt["tokens_per_s"] == 2.0


def test_a_single_run_is_unchanged():
    run = {"ok": True, "tokens_per_s": 5.0}
    assert combine_runs("gpt", [run]) is run
    assert "repeat" not in run_smoke("py", ["gpt"], "tiny", fake_runner({"gpt": [7.0]}))["gpt"]


@pytest.mark.slow
def test_cli_repeat_into_a_run_then_the_report_shows_the_spread(tmp_path):
    out = tmp_path / "smoke.json"
    p = subprocess.run([sys.executable, "-m", "envbuild", "smoke", "--local", "--kind", "collective",
                        "--repeat", "3", "-o", str(out)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "(median of 3:" in p.stdout
    res = json.loads(out.read_text())
    values = res["collective"]["repeat"]["values"]["max_busbw_gbps"]
    assert len(values) == 3 and res["collective"]["max_busbw_gbps"] == sorted(values)[1]
    run = tmp_path / "run"
    shutil.copytree(SAMPLE, run)
    smoke = json.loads((run / "nodes" / "gpu-a" / "smoke.json").read_text())
    smoke["collective"] = res["collective"]
    (run / "nodes" / "gpu-a" / "smoke.json").write_text(json.dumps(smoke))
    report = collect(run)
    (row,) = [b for n in report.nodes if n.host == "gpu-a" for b in n.benchmarks
              if b.name == "collective.max_busbw_gbps"]
    assert row.spread is not None and (row.spread.n, row.spread.min, row.spread.max) == (3, min(values), max(values))
    assert "(n=3)" in render(report, "md") and "(n=3)" in render(report, "html")
