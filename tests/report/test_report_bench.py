"""Benchmark rows from smoke.json sections: the verdicts stored there, shown, never decided again
(pure)."""

from __future__ import annotations


from envbuild.recipes import load_recipe
from envbuild.recipes.schema import Benchmark as RecipeBenchmark
from envbuild.report.bench import benchmarks, section_ok, stored_verdict
from envbuild.smoke.judge import Evidence, judge
from support.paths import ROOT

RESULTS = ROOT / "docs" / "results"


def test_an_older_native_verdict_is_mapped_in_one_place():
    old = {"status": "fail", "passed": False, "metric": "elapsed_time_per_iteration_ms", "value": 950.0,
           "threshold": 900.0, "reason": "elapsed_time_per_iteration_ms = 950 misses the threshold <= 900"}
    smoke = {"native": {"verdict": old, "unit": "ms", "higher_is_better": False}}
    [row] = benchmarks(smoke)
    assert (row.name, row.value, row.threshold, row.passed, row.unit, row.verdict) == (
        "native.elapsed_time_per_iteration_ms", 950.0, 900.0, False, "ms", "FAIL")
    # what the recipe says now does not change a stored verdict; its published figure (the
    # recipe's typed benchmark, as recipe.json is read) is shown beside one that did not store it
    now = RecipeBenchmark(command="train", parser="megatron-pretrain", metric="elapsed_time_per_iteration_ms",
                          threshold=2000.0, higher_is_better=False, unit="ms",
                          published={"value": 900.0, "source": "https://example.org/paper"})
    [row] = benchmarks(smoke, now)
    assert (row.passed, row.verdict, row.threshold) == (False, "FAIL", 900.0)
    assert row.published_source == "https://example.org/paper" and row.published_not_compared


def test_an_older_verdict_without_its_metric_is_nothing_found_and_a_section_without_one_is_not_judged():
    old = {"status": "fail", "passed": False, "metric": "samples_per_s", "value": None, "threshold": None,
           "reason": "metric 'samples_per_s' not found", "completion": {"state": "complete"}}
    assert stored_verdict({"verdict": old}).verdict == "NOTHING FOUND"
    [row] = benchmarks({"native": {"metrics": {"samples_per_s": 3.0}, "metric": "samples_per_s"}})
    assert row.passed is None and row.verdict == "NOT JUDGED" and "no verdict was stored" in row.reason
    bench = RecipeBenchmark(command="train", parser="opt-baselines", metric="samples_per_s", threshold=2.0)
    assert benchmarks({"native": {"metrics": {"wps": 1.0}}}, bench) == []


def test_a_reference_verdict_names_both_records():
    record = "h200x2-run4/native.out"
    bench = load_recipe("h100-megatron-deepspeed").benchmark
    verdict = judge(Evidence(recipe="h100-megatron-deepspeed", benchmark=bench, record="smoke/native.out",
                             text=(RESULTS / record).read_text(), gpu="NVIDIA H200", gpus=2))
    [row] = benchmarks({"native": {"ran": True, "verdict": verdict.to_dict()}})
    assert row.verdict == "PASS" and row.passed is True and row.threshold is None
    # not one of the reference's runs (no sha256 given): compared with the median of all three
    three = f"docs/results/{record}, docs/results/h200x2-run6/native.out, docs/results/h200x4-run11/hmds-run1/native.out"
    assert row.reference == three and row.record == "smoke/native.out"
    assert row.reference_value == verdict.compared.value
    assert f"(the median of 3 run(s), tolerance 5.0%: {three})" in row.compared_with
    assert "on 2 x NVIDIA H200" in row.compared_with


def test_gpt_floors_are_the_judges_and_rows_without_floors_are_not_judged():
    smoke = {"gpt": {"ok": True, "tokens_per_s": 10.0, "tflops": 1.0, "mfu": 0.1, "thresholds": {"mfu": 0.2}},
             "collective": {"ok": False, "max_busbw_gbps": 5.0, "max_algbw_gbps": 10.0}}
    rows = {r.name: r for r in benchmarks(smoke)}
    assert set(rows) == {"gpt.tokens_per_s", "gpt.tflops", "gpt.mfu", "collective.max_busbw_gbps"}
    assert rows["gpt.mfu"].passed is False and rows["gpt.tokens_per_s"].passed is None
    assert section_ok(smoke) == {"collective": False, "gpt": True}
    smoke["gpt"]["floors"] = {"mfu": True}  # what the judge stored is shown
    assert {r.name: r for r in benchmarks(smoke)}["gpt.mfu"].passed is True


def test_unreadable_smoke_section_is_not_ok():
    assert section_ok({"gpt": {"error": "unreadable smoke output: Expecting value"}}) == {"gpt": False}
