"""The shipped same-GPU references (envbuild/smoke/references.json) are what their raw records
in docs/results say: each run's value as the recipe's parser reads it, the record's sha256, and
the GPU model and count its node recorded. Nothing is typed in by hand: ``ENVBUILD_UPDATE_GOLDEN=1``
writes every derived field from the records, and this test fails when one stops matching.

The repeat rule (envbuild.smoke.repeat) is checked on the records: each recorded run judged
against the other runs of its reference, a 10 % slowdown made from a real record, a reference
whose runs spread too far, and another GPU count of the same model."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from envbuild.fsio import sha256_file
from envbuild.recipes import load_recipe
from envbuild.smoke import references as refs
from envbuild.smoke import repeat
from envbuild.smoke.hardware import node_gpus
from envbuild.smoke.judge import Evidence, judge

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
TABLE = ROOT / "envbuild" / "smoke" / refs.TABLE
RUNS = [(ref, run) for ref in refs.load(TABLE.read_text()) for run in ref.runs]


def recorded_gpu(facts_file: Path) -> tuple[str | None, int | None]:
    """(GPU model, count) from the node's facts.json, or from the report written on the node."""
    data = json.loads(facts_file.read_text())
    if "gpus" in data:
        return node_gpus(data)
    (node,) = data["nodes"]
    return node["facts"]["gpu"], node["facts"]["gpu_count"]


def judged(recipe: str, record: str, facts: str, **kw):
    gpu, gpus = recorded_gpu(RESULTS / facts)
    path = RESULTS / record
    return judge(Evidence(recipe=recipe, benchmark=load_recipe(recipe).benchmark, record=record, gpu=gpu,
                          gpus=gpus, text=path.read_text(errors="replace"), sha256=sha256_file(path), **kw))


def derived(ref: refs.Reference) -> refs.Reference:
    runs = []
    for run in ref.runs:
        verdict = judged(ref.recipe, run.record, run.facts)
        gpu, gpus = recorded_gpu(RESULTS / run.facts)
        assert (gpu, verdict.gpus or gpus) == (ref.gpu, ref.gpus), f"{run.record} ran on {verdict.gpus} x {gpu}"
        runs.append(refs.Run(record=run.record, facts=run.facts, tenancy=run.tenancy, value=verdict.value,
                             sha256=sha256_file(RESULTS / run.record)))
    return refs.Reference(recipe=ref.recipe, gpu=ref.gpu, gpus=ref.gpus,
                          metric=load_recipe(ref.recipe).benchmark.metric, runs=tuple(runs))


def test_every_reference_is_recomputed_from_its_raw_records():
    table = refs.load(TABLE.read_text())
    want = tuple(derived(ref) for ref in table)
    if os.environ.get("ENVBUILD_UPDATE_GOLDEN"):
        TABLE.write_text(refs.dump(want))
        refs.references.cache_clear()
    assert table == want or os.environ.get("ENVBUILD_UPDATE_GOLDEN")
    assert all(run.value and len(run.sha256) == 64 and run.tenancy for ref in want for run in ref.runs)
    # one reference per recipe, GPU model and count
    keys = [(r.recipe, r.gpu, r.gpus) for r in want]
    assert len(keys) == len(set(keys))


def test_the_table_ships_with_the_package():
    assert refs.references() == refs.load(TABLE.read_text())
    assert refs.dump(refs.references()) == TABLE.read_text()


@pytest.mark.parametrize("ref,run", RUNS, ids=[run.record for _, run in RUNS])
def test_each_recorded_run_is_judged_against_the_other_runs_of_its_reference(ref, run):
    verdict = judged(ref.recipe, run.record, run.facts)
    others = ref.without(run.sha256)
    assert "never its own yardstick" in verdict.reason
    if not others.runs:
        assert verdict.verdict == "NOT JUDGED" and "has no other run" in verdict.reason, verdict.reason
        return
    rule = repeat.bound(others, load_recipe(ref.recipe).benchmark.higher_is_better)
    assert verdict.compared is not None and verdict.compared.kind == "reference"
    assert verdict.compared.runs == others.records and run.record not in verdict.compared.runs
    assert verdict.compared.value == pytest.approx(rule.center)
    assert verdict.compared.tolerance == pytest.approx(max(repeat.FLOOR, others.deviation or 0.0))
    assert verdict.verdict == ("PASS" if verdict.value >= rule.required else "FAIL"), verdict.reason
    assert all(r in verdict.reason for r in others.records) and f"{len(others.runs)} run(s)" in verdict.reason


def test_the_three_h100_alpa_runs_each_pass_against_the_two_others():
    (ref,) = [r for r in refs.references() if r.recipe == "alpa-megatron-h100" and r.gpus == 1]
    assert len(ref.runs) >= repeat.MIN_RUNS
    for run in ref.runs:
        verdict = judged(ref.recipe, run.record, run.facts)
        assert verdict.verdict == "PASS", verdict.reason


def test_a_later_run_is_judged_against_the_median_of_all_runs_within_their_spread():
    """The two Megatron-DeepSpeed runs on 2 x H200 differ by 6.4 % (run 2 at 93.6 % of run 1): a
    run judged against both (no sha256: not one of them) is compared with their median, and the
    slower healthy one PASSes; against run 1 alone (one run, the 5 % floor) it FAILs."""
    (ref,) = refs.for_recipe("megatron-deepspeed-slurm-h100")
    assert len(ref.runs) == 2 and ref.spread > repeat.FLOOR > ref.deviation
    slow = min(ref.runs, key=lambda r: r.value)
    gpu, gpus = recorded_gpu(RESULTS / slow.facts)
    text = (RESULTS / slow.record).read_text()
    bench = load_recipe(ref.recipe).benchmark
    both = judge(Evidence(recipe=ref.recipe, benchmark=bench, text=text, gpu=gpu, gpus=gpus))
    alone = judge(Evidence(recipe=ref.recipe, benchmark=bench, text=text, gpu=gpu, gpus=gpus,
                           sha256=slow.sha256))
    assert both.verdict == "PASS" and both.compared.value == pytest.approx(ref.median), both.reason
    assert alone.verdict == "FAIL" and alone.compared.tolerance == repeat.FLOOR, alone.reason
    assert "fewer than 3 runs" in alone.reason


def slowed(text: str, factor: float) -> str:
    """A Megatron log whose every iteration took ``factor`` times as long (throughput / factor)."""
    def times(m: re.Match) -> str:
        return f"{m.group(1)}{float(m.group(2)) * factor:.1f}"

    def per(m: re.Match) -> str:
        return f"{m.group(1)}{float(m.group(2)) / factor:.3f}"

    text = re.sub(r"(elapsed time per iteration \(ms\): )([\d.]+)", times, text)
    text = re.sub(r"(samples per second: )([\d.]+)", per, text)
    return re.sub(r"(TFLOPs: )([\d.]+)", per, text)


@pytest.mark.parametrize("recipe", ["megatron-deepspeed-slurm-h100", "h100-megatron-deepspeed"])
def test_a_real_ten_percent_slowdown_fails_where_the_same_run_passes(recipe):
    ref = max(refs.for_recipe(recipe), key=lambda r: r.median)
    run = max(ref.runs, key=lambda r: r.value)  # the fastest: the slowdown is measured from a healthy run
    gpu, gpus = recorded_gpu(RESULTS / run.facts)
    bench = load_recipe(recipe).benchmark
    text = (RESULTS / run.record).read_text()
    healthy = judge(Evidence(recipe=recipe, benchmark=bench, text=text, gpu=gpu, gpus=gpus))
    slow = judge(Evidence(recipe=recipe, benchmark=bench, text=slowed(text, 1.10), gpu=gpu, gpus=gpus))
    assert healthy.verdict == "PASS", healthy.reason
    assert slow.value == pytest.approx(healthy.value / 1.10, rel=0.01)
    assert slow.verdict == "FAIL", slow.reason


def test_a_reference_whose_runs_spread_past_the_cap_judges_nothing():
    runs = tuple(refs.Run(record=f"r{i}", sha256=str(i) * 64, facts="f", value=v, tenancy="alone")
                 for i, v in enumerate((100.0, 91.0, 99.0)))
    ref = refs.Reference(recipe="x", gpu="NVIDIA H200", gpus=2, metric="tflops", runs=runs)
    rule = repeat.bound(ref, higher_is_better=True)
    assert rule.required is None and "cannot tell a real 10 % slowdown" in rule.why
    lower = repeat.bound(refs.Reference(recipe="x", gpu="g", gpus=1, metric="ms", runs=runs[:1]), False)
    assert lower.required == pytest.approx(100.0 / (1 - repeat.FLOOR)) and lower.spread is None


def test_another_gpu_count_of_the_same_model_is_not_judged():
    """The 1-GPU H100 record judged as if on an H200: the H200 reference was recorded on 2 GPUs,
    so nothing is divided out: NOT JUDGED, naming the counts."""
    bench = load_recipe("h100-megatron-deepspeed").benchmark
    verdict = judge(Evidence(recipe="h100-megatron-deepspeed", benchmark=bench, gpu="NVIDIA H200",
                             text=(RESULTS / "h100-offline-run3" / "native.out").read_text()))
    assert verdict.gpus == 1 and verdict.compared is None and verdict.verdict == "NOT JUDGED"
    assert "recorded on 2 GPU(s) and this run used 1 GPU(s)" in verdict.reason


def test_h100_megatron_deepspeed_on_an_unreferenced_gpu_names_h100_and_h200(capsys):
    from envbuild.cli import main
    from envbuild.errors import NOT_JUDGED

    log = RESULTS / "h100-offline-run3" / "native.out"
    rc = main(["parse", "h100-megatron-deepspeed", str(log), "--gpu", "NVIDIA A100-SXM4-80GB", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == NOT_JUDGED and out["verdict"] == "NOT JUDGED"
    assert out["reason"].endswith("references exist for: H100 80GB, H200"), out["reason"]


def test_a_run_that_did_not_complete_fails_before_any_reference():
    ref = refs.for_recipe("h100-megatron-deepspeed")[0]
    text = (RESULTS / ref.runs[0].record).read_text()
    cut = text[:text.index(" iteration       30/")]
    verdict = judge(Evidence(recipe=ref.recipe, benchmark=load_recipe(ref.recipe).benchmark, text=cut, gpu=ref.gpu))
    assert verdict.verdict == "FAIL" and verdict.compared is None and "did not complete" in verdict.reason


@pytest.mark.parametrize("record", ["h200x4-run10/mds-run1/native.out", "h200x4-run10/mds-run2/native.out"])
def test_the_slow_megatron_deepspeed_runs_of_run10_fail_against_the_reference(record):
    """Run 10's two Megatron-DeepSpeed runs on 2 x H200 completed at about 55 % of the speed of
    the reference's runs (docs/results/h200x4-run10.md): complete, and FAIL for their figure."""
    (ref,) = refs.for_recipe("megatron-deepspeed-slurm-h100")
    verdict = judged(ref.recipe, record, record.replace("native.out", "facts.json"))
    assert verdict.completion.state == "complete" and verdict.gpus == 2, verdict.reason
    assert verdict.verdict == "FAIL" and verdict.value < 0.6 * ref.median, verdict.reason
    assert verdict.compared.runs == ref.records and record not in ref.records
