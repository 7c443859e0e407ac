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

from envbuild.record import migrate
from envbuild.record.smoke import SmokeRecord
from envbuild.fsio import sha256_file
from envbuild.recipes import load_recipe
from envbuild.smoke import references as refs
from envbuild.smoke import repeat
from envbuild.smoke.hardware import node_gpus
from envbuild.smoke.judge import Evidence, judge
from support.paths import ROOT

RESULTS = ROOT / "docs" / "results"
TABLE = ROOT / "envbuild" / "smoke" / refs.TABLE
RUNS = [(ref, run) for ref in refs.load(TABLE.read_text()) for run in ref.runs]


def recorded_gpu(facts_file: Path) -> tuple[str | None, int | None]:
    """(GPU model, count) from the node's facts.json, or from the report written on the node."""
    data = json.loads(facts_file.read_text())
    if "gpus" in data:
        gpu, gpus = node_gpus(data)
        smoke = facts_file.with_name("smoke.json")  # the GPUs the run could see, where it recorded them
        if smoke.is_file():
            collective = SmokeRecord.model_validate(migrate.smoke(json.loads(smoke.read_text()))).collective
            gpus = (collective.gpus_visible if collective and collective.gpus_visible else None) or gpus
        return gpu, gpus
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
    if len(ref.runs) < repeat.MIN_RUNS:  # too few runs recorded there: nothing is judged against them
        assert verdict.verdict == "NOT JUDGED" and verdict.compared is None, verdict.reason
        assert f"a reference judges only once it holds {repeat.MIN_RUNS}" in verdict.reason
        assert all(r in verdict.reason for r in ref.records), verdict.reason
        return
    others = ref.without(run.sha256)
    assert "never its own yardstick" in verdict.reason
    higher = load_recipe(ref.recipe).benchmark.higher_is_better
    rule = repeat.bound(others, higher)
    if rule.required is None:  # the other runs spread past the cap
        assert verdict.verdict == "NOT JUDGED" and "cap" in verdict.reason, verdict.reason
        return
    assert verdict.compared is not None and verdict.compared.kind == "reference"
    assert verdict.compared.runs == others.records and run.record not in verdict.compared.runs
    assert verdict.compared.value == pytest.approx(rule.center)
    assert verdict.compared.tolerance == pytest.approx(max(repeat.FLOOR, others.deviation or 0.0))
    meets = verdict.value >= rule.required if higher else verdict.value <= rule.required
    assert verdict.verdict == ("PASS" if meets else "FAIL"), verdict.reason
    assert all(r in verdict.reason for r in others.records) and f"{len(others.runs)} run(s)" in verdict.reason


def test_every_reference_that_judges_holds_at_least_three_runs():
    """A set of fewer runs on a GPU model and count is recorded, and judges nothing: a run that
    is none of them (no sha256 given) is NOT JUDGED, naming them."""
    few = [r for r in refs.references() if len(r.runs) < repeat.MIN_RUNS]
    assert few, "the test needs a set of fewer runs"
    for ref in few:
        run = ref.runs[0]
        gpu, gpus = recorded_gpu(RESULTS / run.facts)
        verdict = judge(Evidence(recipe=ref.recipe, benchmark=load_recipe(ref.recipe).benchmark, gpu=gpu, gpus=gpus,
                                 text=(RESULTS / run.record).read_text(errors="replace")))
        assert verdict.verdict == "NOT JUDGED" and verdict.compared is None, verdict.reason
        assert f"{len(ref.runs)} run(s) are recorded on {ref.gpus} x {ref.gpu}" in verdict.reason


def test_the_three_h100_alpa_runs_each_pass_against_the_two_others():
    (ref,) = [r for r in refs.references()
              if r.recipe == "alpa-megatron-h100" and r.gpus == 1 and r.gpu == "NVIDIA H100 80GB HBM3"]
    assert len(ref.runs) >= repeat.MIN_RUNS
    for run in ref.runs:
        verdict = judged(ref.recipe, run.record, run.facts)
        assert verdict.verdict == "PASS", verdict.reason


@pytest.mark.parametrize("recipe,gpus", [("opt-175b-azure-h100", 2), ("megatronapp-h100", 4), ("gpt-neox-sm90", 1)])
def test_the_latest_run_passes_against_the_earlier_runs_of_its_reference(recipe, gpus):
    """The last run recorded (the reference lists runs in the order they ran) judged against
    every earlier one, at least three: OPT's run 10 run 4 against run 8's and run 10's first
    three; MegatronApp's run 11 run 3 against run 8's and run 11's first two; GPT-NeoX's run 15
    run 4 against the three before it, on the same 1 x H200."""
    (ref,) = [r for r in refs.for_recipe(recipe) if r.gpu == "NVIDIA H200" and r.gpus == gpus]
    *earlier, latest = ref.runs
    assert len(earlier) >= repeat.MIN_RUNS
    verdict = judged(recipe, latest.record, latest.facts)
    assert verdict.verdict == "PASS", verdict.reason
    assert verdict.compared.runs == [r.record for r in earlier]
    assert f"the median ({verdict.compared.value:.6g}) of {len(earlier)} run(s)" in verdict.reason


def slowed(text: str, factor: float) -> str:
    """A Megatron log whose every iteration took ``factor`` times as long (throughput / factor)."""
    def times(m: re.Match) -> str:
        return f"{m.group(1)}{float(m.group(2)) * factor:.1f}"

    def per(m: re.Match) -> str:
        return f"{m.group(1)}{float(m.group(2)) / factor:.3f}"

    text = re.sub(r"(elapsed time per iteration \(ms\): )([\d.]+)", times, text)
    text = re.sub(r"(samples per second: )([\d.]+)", per, text)
    return re.sub(r"(TFLOPs: )([\d.]+)", per, text)


@pytest.mark.parametrize("recipe", ["h100-megatron-deepspeed"])
def test_a_real_ten_percent_slowdown_fails_where_the_same_run_passes(recipe):
    ref = max((r for r in refs.for_recipe(recipe) if len(r.runs) >= repeat.MIN_RUNS), key=lambda r: r.median)
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
    """A 2-GPU H200 record judged as if on an H100: the H100 reference was recorded on 1 GPU,
    so nothing is divided out: NOT JUDGED, naming the counts."""
    bench = load_recipe("h100-megatron-deepspeed").benchmark
    verdict = judge(Evidence(recipe="h100-megatron-deepspeed", benchmark=bench, gpu="NVIDIA H100 80GB HBM3",
                             text=(RESULTS / "h200x2-run4" / "native.out").read_text()))
    assert verdict.gpus == 2 and verdict.compared is None and verdict.verdict == "NOT JUDGED"
    assert "recorded on 1 GPU(s) and this run used 2 GPU(s)" in verdict.reason, verdict.reason


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


def test_a_slowdown_made_by_a_co_located_gpu_load_fails():
    """Run 11, line 5: h100-megatron-deepspeed on GPUs 2,3 of a 4 x H200 node while
    bench/gpu_load.py kept both GPUs busy in bursts (its records say how long and how busy; the
    GPUs' settings untouched): complete, about 6 % slower than the reference's median, FAIL. The
    same setup's run on the same node without the load (line 3) is one of the reference's runs."""
    (ref,) = [r for r in refs.for_recipe("h100-megatron-deepspeed") if r.gpu == "NVIDIA H200" and r.gpus == 2]
    assert len(ref.runs) >= repeat.MIN_RUNS and "h200x4-run11/hmds-run1/native.out" in ref.records
    loads = [json.loads((RESULTS / f"h200x4-run11/session/load-line5-gpu{g}.json").read_text()) for g in (2, 3)]
    assert all(rec["duty_achieved"] > 0.15 and rec["busy_s"] > 30 for rec in loads), loads
    record = "h200x4-run11/hmds-run2/native.out"
    assert record not in ref.records
    verdict = judged(ref.recipe, record, record.replace("native.out", "facts.json"))
    assert verdict.completion.state == "complete" and verdict.gpus == 2, verdict.reason
    assert verdict.verdict == "FAIL" and verdict.compared.runs == ref.records, verdict.reason
    assert 0.90 < verdict.value / ref.median < 1 - repeat.FLOOR


def test_megatron_deepspeed_on_three_h200_nodes_spreads_past_the_cap_so_nothing_is_judged():
    """Six complete runs of megatron-deepspeed-slurm-h100 on 2 x H200 of three lent 4 x H200
    machines (runs 8, 10, 11): run 8's two at 127-136 samples/s, the four later ones at 71-87,
    the GPUs at full clocks with no throttle reason (docs/results/h200x4-run11.md). Such a
    reference cannot tell a real 10 % slowdown from the machine a run lands on: a new run of it
    is NOT JUDGED, naming the cap, whatever its figure."""
    (ref,) = refs.for_recipe("megatron-deepspeed-slurm-h100")
    assert len(ref.runs) == 6 and ref.deviation > repeat.CAP
    for run in ref.runs:
        gpu, gpus = recorded_gpu(RESULTS / run.facts)
        verdict = judge(Evidence(recipe=ref.recipe, benchmark=load_recipe(ref.recipe).benchmark, gpu=gpu, gpus=gpus,
                                 text=(RESULTS / run.record).read_text()))
        assert verdict.completion.state == "complete", verdict.reason
        assert verdict.verdict == "NOT JUDGED" and "cannot tell a real 10 % slowdown from noise" in verdict.reason
