"""Benchmark rows from smoke.json sections, judged against thresholds (pure)."""

from __future__ import annotations

from envbuild.report.bench import benchmarks, section_ok
from envbuild.smoke.native import evaluate


def test_native_verdict_section_and_lower_is_better():
    verdict = evaluate({"elapsed_time_per_iteration_ms": 950.0}, "elapsed_time_per_iteration_ms", 900.0, False)
    smoke = {"native": {"verdict": verdict.to_dict()}}
    [row] = benchmarks(smoke, {"metric": "elapsed_time_per_iteration_ms", "threshold": 900.0,
                               "higher_is_better": False, "unit": "ms"})
    assert (row.name, row.value, row.threshold, row.passed, row.unit) == (
        "native.elapsed_time_per_iteration_ms", 950.0, 900.0, False, "ms")


def test_gpt_and_collective_rows_without_thresholds_are_not_judged():
    smoke = {"gpt": {"ok": True, "tokens_per_s": 10.0, "tflops": 1.0, "mfu": 0.1, "thresholds": {"mfu": 0.2}},
             "collective": {"ok": False, "max_busbw_gbps": 5.0, "max_algbw_gbps": 10.0}}
    rows = {r.name: r for r in benchmarks(smoke, None)}
    assert set(rows) == {"gpt.tokens_per_s", "gpt.tflops", "gpt.mfu", "collective.max_busbw_gbps"}
    assert rows["gpt.mfu"].passed is False and rows["gpt.tokens_per_s"].passed is None
    assert section_ok(smoke) == {"collective": False, "gpt": True}


def test_native_metric_absent_from_log_fails_only_with_a_threshold():
    [row] = benchmarks({"native": {"metrics": {"wps": 1.0}}}, {"metric": "samples_per_s", "threshold": 2.0})
    assert row.value is None and row.passed is False
    [row] = benchmarks({"native": {"metrics": {"wps": 1.0}}}, {"metric": "samples_per_s", "threshold": None})
    assert row.value is None and row.passed is None


def test_unreadable_smoke_section_is_not_ok():
    assert section_ok({"gpt": {"error": "unreadable smoke output: Expecting value"}}) == {"gpt": False}
