"""The shipped same-GPU references (envbuild/smoke/references.json) are what their raw records
in docs/results say: the value the recipe's parser reads, the record's sha256, and the GPU model
and count its node recorded. Nothing is typed in by hand: ``ENVBUILD_UPDATE_GOLDEN=1`` writes
every derived field from the records, and this test fails when one stops matching."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envbuild.fsio import sha256_file
from envbuild.recipes import load_recipe
from envbuild.smoke import references as refs
from envbuild.smoke.hardware import node_gpus
from envbuild.smoke.judge import Evidence, judge

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
TABLE = ROOT / "envbuild" / "smoke" / refs.TABLE


def recorded_gpu(facts_file: Path) -> tuple[str | None, int | None]:
    """(GPU model, count) from the node's facts.json, or from the report written on the node."""
    data = json.loads(facts_file.read_text())
    if "gpus" in data:
        return node_gpus(data)
    (node,) = data["nodes"]
    return node["facts"]["gpu"], node["facts"]["gpu_count"]


def derived(row: dict) -> dict:
    record = RESULTS / row["record"]
    gpu, gpus = recorded_gpu(RESULTS / row["facts"])
    bench = load_recipe(row["recipe"]).benchmark
    verdict = judge(Evidence(recipe=row["recipe"], benchmark=bench, text=record.read_text(errors="replace"),
                             gpu=gpu, gpus=gpus))
    return {**row, "gpu": gpu, "gpus": verdict.gpus or gpus, "metric": bench.metric, "value": verdict.value,
            "sha256": sha256_file(record)}


def test_every_reference_is_recomputed_from_its_raw_record():
    data = json.loads(TABLE.read_text())
    want = [derived(row) for row in data["references"]]
    if os.environ.get("ENVBUILD_UPDATE_GOLDEN"):
        rows = ",\n".join("    " + json.dumps(r, sort_keys=True) for r in want)
        TABLE.write_text('{\n  "schema": "envbuild.references/1",\n  "references": [\n' + rows + "\n  ]\n}\n")
        refs.references.cache_clear()
    assert data["references"] == want or os.environ.get("ENVBUILD_UPDATE_GOLDEN")
    assert all(r["value"] and r["gpus"] and len(r["sha256"]) == 64 for r in want)


def test_the_table_ships_with_the_package():
    assert [r.to_dict() for r in refs.references()] == json.loads(TABLE.read_text())["references"]


@pytest.mark.parametrize("row", json.loads(TABLE.read_text())["references"], ids=lambda r: r["record"])
def test_a_recorded_run_on_its_gpu_is_its_own_pass(row):
    gpu, gpus = recorded_gpu(RESULTS / row["facts"])
    bench = load_recipe(row["recipe"]).benchmark
    verdict = judge(Evidence(recipe=row["recipe"], benchmark=bench, record=row["record"],
                             text=(RESULTS / row["record"]).read_text(errors="replace"), gpu=gpu, gpus=gpus))
    assert verdict.verdict == "PASS", verdict.reason
    assert verdict.compared.kind == "reference" and verdict.compared.source == f"docs/results/{row['record']}"


def test_h100_megatron_deepspeed_on_an_unreferenced_gpu_names_h100_and_h200(capsys):
    from envbuild.cli import main
    from envbuild.errors import NOT_JUDGED

    log = RESULTS / "h100-offline-run3" / "native.out"
    rc = main(["parse", "h100-megatron-deepspeed", str(log), "--gpu", "NVIDIA A100-SXM4-80GB", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == NOT_JUDGED and out["verdict"] == "NOT JUDGED"
    assert out["reason"].endswith("references exist for: H100 80GB, H200"), out["reason"]


def test_counts_that_differ_are_compared_per_gpu_and_said():
    """The 1-GPU H100 log judged as if on an H200 meets the 2-GPU H200 reference per GPU: the
    bound is 95 % of half the reference, and the verdict says how it was divided."""
    (h200,) = [r for r in refs.for_recipe("h100-megatron-deepspeed") if r.gpu == "NVIDIA H200"]
    bench = load_recipe("h100-megatron-deepspeed").benchmark
    verdict = judge(Evidence(recipe=h200.recipe, benchmark=bench, gpu="NVIDIA H200",
                             text=(RESULTS / "h100-offline-run3" / "native.out").read_text()))
    assert verdict.gpus == 1 and verdict.compared.gpus == 2
    assert verdict.compared.required == pytest.approx(h200.value / 2 * refs.SHARE)
    assert verdict.compared.normalisation.startswith("per GPU: the reference's")
    assert verdict.verdict == ("PASS" if verdict.value >= verdict.compared.required else "FAIL")


def test_a_run_that_did_not_complete_fails_before_any_reference():
    row = refs.for_recipe("h100-megatron-deepspeed")[0]
    text = (RESULTS / row.record).read_text()
    cut = text[:text.index(" iteration       30/")]
    verdict = judge(Evidence(recipe=row.recipe, benchmark=load_recipe(row.recipe).benchmark, text=cut, gpu=row.gpu))
    assert verdict.verdict == "FAIL" and verdict.compared is None and "did not complete" in verdict.reason


# later runs recorded on a referenced GPU model: (recipe, raw record, the node's facts), each
# judged against the reference of its model, never against itself
LATER_RUNS = [
    ("alpa-megatron-h100", "alpa-megatron/h100-run3-native.out", "alpa-megatron/h100-run3-report.json"),
    ("alpa-megatron-h100", "alpa-megatron/h100-run4-native.out", "alpa-megatron/h100-run4-facts.json"),
    ("h100-megatron-deepspeed", "h100-offline-run5/native.out", "h100-offline-run5/facts.json"),
    ("h100-megatron-deepspeed", "h200x2-run6/native.out", "h200x2-run6/facts.json"),
    ("alpa-megatron-h100", "h200x4-run7/alpa-run2/native.out", "h200x4-run7/alpa-run2/facts.json"),
    ("megatron-deepspeed-slurm-h100", "h200x4-run8/mds-run2/native.out", "h200x4-run8/mds-run2/facts.json"),
    ("alpa-megatron-h100", "h100x4-run9/alpa-run2/native.out", "h100x4-run9/alpa-run2/facts.json"),
    ("opt-175b-azure-h100", "h100x4-run9/opt-run2/native.out", "h100x4-run9/opt-run2/facts.json"),
]


@pytest.mark.parametrize("recipe,record,facts", LATER_RUNS, ids=[r[1] for r in LATER_RUNS])
def test_a_later_recorded_run_is_judged_against_the_first_on_its_gpu(recipe, record, facts):
    gpu, gpus = recorded_gpu(RESULTS / facts)
    bench = load_recipe(recipe).benchmark
    verdict = judge(Evidence(recipe=recipe, benchmark=bench, record=record, gpu=gpu, gpus=gpus,
                             text=(RESULTS / record).read_text(errors="replace")))
    ref = refs.for_gpu(recipe, gpu, verdict.gpus)  # the GPUs the run used (its log), not the node's
    assert ref is not None and ref.record != record and ref.gpus == verdict.gpus
    assert verdict.compared is not None and verdict.compared.source == f"docs/results/{ref.record}"
    assert verdict.verdict == ("PASS" if verdict.value >= 0.95 * ref.value else "FAIL"), verdict.reason
    assert record in verdict.reason and ref.record in verdict.reason
