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
from support.paths import ROOT

RESULTS = ROOT / "docs" / "results"


def report(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envbuild", "report", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "ENVBUILD_HOME": str(cwd / ".home")})


def by_record(out: str) -> dict[str, dict]:
    return {r["record"]: r for r in json.loads(out)["records"]}


def test_a_committed_four_gpu_session_is_judged_again(tmp_path):
    got = report(str(RESULTS / "h200x4-run11"), "--format", "json", cwd=tmp_path)
    rows = by_record(got.stdout)
    # MegatronApp's third run PASSed on the node against run 8's one run; today it is one of the
    # reference's four runs, judged against the three others, never against itself
    run3 = rows["mapp-run3/native.out"]
    assert run3["stored"] == "PASS" and run3["now"]["verdict"] == "PASS"
    assert run3["now"]["compared"]["runs"] == ["h200x4-run8/mapp-run1/native.out", "h200x4-run11/mapp-run1/native.out",
                                               "h200x4-run11/mapp-run2/native.out"]
    assert "never its own yardstick" in run3["now"]["reason"]
    assert run3["recipe"] == "megatronapp-h100" and run3["recipe_from"] == "mapp-run3/run.json"
    assert run3["gpu"] == "NVIDIA H200" and run3["gpu_from"] == "mapp-run3/facts.json"
    # the run beside a co-located GPU load still FAILs, now against three runs
    assert rows["hmds-run2/native.out"]["now"]["verdict"] == "FAIL"
    assert len(rows["hmds-run2/native.out"]["now"]["compared"]["runs"]) == 3
    # Megatron-DeepSpeed FAILed that day against run 8's two runs; its six runs now spread past the cap
    mds = rows["mds-run1/native.out"]
    assert mds["stored"] == "FAIL" and mds["now"]["verdict"] == "NOT JUDGED" and mds["changed"] is True
    assert got.returncode == 1, got.stderr


def test_a_session_with_a_run_that_trained_nothing_exits_1(tmp_path):
    got = report(str(RESULTS / "h100x4-run9"), "--format", "json", cwd=tmp_path)
    rows = by_record(got.stdout)
    # a run that resumed and trained nothing still holds no figure; so the folder exits 1
    assert rows["opt-resumed/native.out"]["now"]["verdict"] == "NOTHING FOUND"
    # two runs on 2 x H100 are recorded: too few for a reference, so nothing is judged against them
    run2 = rows["alpa-run2/native.out"]
    assert run2["now"]["verdict"] == "NOT JUDGED" and "a reference judges only once it holds 3" in run2["now"]["reason"]
    assert got.returncode == 1, got.stderr


def test_the_markdown_names_what_changed_since_that_day(tmp_path):
    got = report(str(RESULTS / "h200x4-run11"), cwd=tmp_path)
    line = next(x for x in got.stdout.splitlines() if x.startswith("| `mds-run1/native.out`"))
    # FAIL on the node against run 8's two runs; today its reference's six runs spread past the cap
    assert "| FAIL | **NOT JUDGED** (changed) |" in line and "cap" in line
    assert got.returncode == 1 and "Traceback" not in got.stderr


def test_a_record_nothing_names_needs_its_recipe(tmp_path):
    folder = tmp_path / "copied"
    folder.mkdir()
    # one byte more than the committed record, so no reference's sha256 names its recipe either
    (folder / "native.out").write_bytes((RESULTS / "h200x4-run11" / "mapp-run3" / "native.out").read_bytes() + b"\n")
    shutil.copy(RESULTS / "h200x4-run11" / "mapp-run3" / "facts.json", folder / "facts.json")
    bare = report(str(folder), "--format", "json", cwd=tmp_path)
    (row,) = json.loads(bare.stdout)["records"]
    assert row["now"] is None and "--as-recipe" in row["why_not"] and bare.returncode == 1
    named = report(str(folder), "--format", "json", "--as-recipe", "megatronapp-h100", cwd=tmp_path)
    (row,) = json.loads(named.stdout)["records"]
    assert row["now"]["verdict"] == "PASS" and row["recipe_from"] == "--as-recipe" and named.returncode == 0
    assert len(row["now"]["compared"]["runs"]) == 4  # not one of them: judged against all four
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
    if len(ref.runs) < 3:  # too few runs recorded there to judge anything against
        assert v.verdict == "NOT JUDGED" and v.compared is None, v.reason
    else:
        assert "never its own yardstick" in v.reason
