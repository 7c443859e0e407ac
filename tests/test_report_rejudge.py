"""`envbuild report DIR` on committed results judges their raw records again under today's rules
(issue 39): the records in docs/results as they are, the verdict stored beside each that day, and
a reference never compared with itself."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.recipes import load_recipe
from envbuild.smoke import references as refs
from envbuild.smoke.judge import Evidence, judge

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"


def report(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envbuild", "report", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "ENVBUILD_HOME": str(cwd / ".home")})


def by_record(out: str) -> dict[str, dict]:
    return {r["record"]: r for r in json.loads(out)["records"]}


def test_a_committed_four_gpu_session_is_judged_again(tmp_path):
    got = report(str(RESULTS / "h100x4-run9"), "--format", "json", cwd=tmp_path)
    rows = by_record(got.stdout)
    # alpa-run2 was NOT JUDGED that day (no 2-GPU reference yet); today it is one of the 2-GPU
    # reference's runs, judged against the others (run1), never against itself
    run2 = rows["alpa-run2/native.out"]
    assert run2["stored"] == "NOT JUDGED" and run2["now"]["verdict"] == "PASS" and run2["changed"] is True
    assert run2["now"]["compared"]["runs"] == ["h100x4-run9/alpa-run1/native.out"]
    assert "never its own yardstick" in run2["now"]["reason"]
    assert run2["recipe"] == "alpa-megatron-h100" and run2["recipe_from"] == "alpa-run2/run.json"
    assert run2["gpu"] == "NVIDIA H100 80GB HBM3" and run2["gpu_from"] == "alpa-run2/facts.json"
    ref = rows["opt-run1/native.out"]
    assert ref["now"]["compared"]["runs"] == ["h100x4-run9/opt-run2/native.out"]
    # a run that resumed and trained nothing still holds no figure; so the folder exits 1
    assert rows["opt-resumed/native.out"]["now"]["verdict"] == "NOTHING FOUND"
    assert got.returncode == 1, got.stderr


def test_the_markdown_names_what_changed_since_that_day(tmp_path):
    got = report(str(RESULTS / "h200x4-run8"), cwd=tmp_path)
    line = next(x for x in got.stdout.splitlines() if x.startswith("| `mds-run2/native.out`"))
    # judged against the other run of its reference (run 1 alone: the 5 % floor): 93.6 % of it
    assert "| NOT JUDGED | **FAIL** (changed) |" in line and "mds-run1/native.out" in line
    assert got.returncode == 1 and "Traceback" not in got.stderr


def test_a_record_nothing_names_needs_its_recipe(tmp_path):
    folder = tmp_path / "copied"
    folder.mkdir()
    # one byte more than the committed record, so no reference's sha256 names its recipe either
    (folder / "native.out").write_bytes((RESULTS / "h100x4-run9" / "alpa-run2" / "native.out").read_bytes() + b"\n")
    shutil.copy(RESULTS / "h100x4-run9" / "alpa-run2" / "facts.json", folder / "facts.json")
    bare = report(str(folder), "--format", "json", cwd=tmp_path)
    (row,) = json.loads(bare.stdout)["records"]
    assert row["now"] is None and "--as-recipe" in row["why_not"] and bare.returncode == 1
    named = report(str(folder), "--format", "json", "--as-recipe", "alpa-megatron-h100", cwd=tmp_path)
    (row,) = json.loads(named.stdout)["records"]
    assert row["now"]["verdict"] == "PASS" and row["recipe_from"] == "--as-recipe" and named.returncode == 0
    assert row["stored"] is None  # nothing stored beside it


def test_a_folder_without_records_or_run_json_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    got = report(str(tmp_path / "empty"), cwd=tmp_path)
    assert got.returncode == 2 and "holds no native.out record" in got.stderr and "Traceback" not in got.stderr


@pytest.mark.parametrize("ref,run", refs.runs(), ids=lambda x: getattr(x, "record", ""))
def test_a_reference_given_its_digest_is_not_compared_with_itself(ref, run):
    raw = (RESULTS / run.record).read_bytes()
    bench = load_recipe(ref.recipe).benchmark
    v = judge(Evidence(recipe=ref.recipe, benchmark=bench, text=raw.decode(errors="replace"),
                       gpu=ref.gpu, gpus=ref.gpus, sha256=run.sha256))
    assert v.compared is None or run.record not in v.compared.runs
    assert "never its own yardstick" in v.reason
