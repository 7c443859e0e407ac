"""The built-in GPU smoke is judged against a floor: MFU of the matmul peak it measures on the
same GPU (envbuild.smoke.floors), read from the records captured on the lent H100 and H200."""

from __future__ import annotations

import json
from pathlib import Path

from envbuild.report.bench import benchmarks
from envbuild.smoke import read_result
from envbuild.smoke.floors import FLOORS, floors_for

ROOT = Path(__file__).resolve().parents[1]
RECORDS = [ROOT / "docs/results/h100-offline-run3/gpt.out", ROOT / "docs/results/h200x2-run4/gpt.out",
           ROOT / "tests/data/native_logs/envbuild_smoke_h100.log"]


def test_every_floor_names_its_source_and_the_captured_runs_meet_it() -> None:
    for f in FLOORS:
        assert f.source and f.why and 0 < f.floor < 1
    for path in RECORDS:
        record = read_result("gpt", 0, path.read_text(), "")
        assert record["thresholds"] == {"mfu": 0.40}, path
        [row] = [b for b in benchmarks({"gpt": record}, None) if b.name == "gpt.mfu"]
        assert row.threshold == 0.40 and row.passed is True and row.value > 0.6, path


def test_a_gpu_run_below_the_floor_fails_and_cpu_or_other_shapes_are_not_floored() -> None:
    text = RECORDS[0].read_text()
    line = next(x for x in text.splitlines() if x.startswith("{"))
    slow = json.loads(line)
    slow["mfu"] = 0.25
    record = read_result("gpt", 0, json.dumps(slow), "")
    [row] = [b for b in benchmarks({"gpt": record}, None) if b.name == "gpt.mfu"]
    assert row.passed is False and row.threshold == 0.40
    assert floors_for({**slow, "device": "cpu"}) == {}
    assert floors_for({**slow, "config": {**slow["config"], "layers": 2}}) == {}
    assert floors_for({**slow, "device": "cuda:1"}) == {"mfu": 0.4}
