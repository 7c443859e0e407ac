"""The built-in GPU smoke is judged against floors (envbuild.smoke.floors): MFU of the matmul peak
it measures on the same GPU, and the all-reduce's bus bandwidth on the GPU model it was measured
on, read from the records captured on the lent H100 and H200s."""

from __future__ import annotations

import json

from envbuild.report.bench import benchmarks
from envbuild.smoke import read_result
from envbuild.smoke.floors import FLOORS, floors_for
from support.paths import ROOT

RECORDS = [ROOT / "docs/results/h100-offline-run3/gpt.out", ROOT / "docs/results/h200x2-run4/gpt.out",
           ROOT / "tests/data/native_logs/envbuild_smoke_h100.log"]


COLLECTIVE = ROOT / "docs/results/gpu-smoke"


def test_every_floor_names_its_source_and_the_captured_runs_meet_it() -> None:
    for f in FLOORS:
        assert f.source and f.why and f.floor > 0
        assert f.floor < 1 or f.metric != "mfu"
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


def _collective(name: str) -> dict:
    return read_result("collective", 0, (COLLECTIVE / name).read_text(), "")


def _busbw_row(record: dict):
    [row] = [b for b in benchmarks({"collective": record}, None) if b.name == "collective.max_busbw_gbps"]
    return row


def test_the_nccl_sweep_on_two_h200s_meets_its_floor_and_one_without_peer_access_fails_it() -> None:
    """NCCL over both GPUs, 1 MiB to 1 GiB: the NVLink runs pass the floor, the same GPUs with
    NCCL_P2P_DISABLE=1 (through host memory) fail it, judged by the report's own rows."""
    [row] = [f for f in FLOORS if f.kind == "collective"]
    for name in ("collective-1.out", "collective-2.out"):
        record = _collective(name)
        assert record["backend"] == "nccl" and record["world_size"] == 2 and record["ok"] is True
        assert record["config"]["max_bytes"] >= 1 << 30 and record["thresholds"] == {"max_busbw_gbps": row.floor}
        busbw = [r["busbw_gbps"] for r in record["results"]]
        assert max(busbw) == busbw[-1] > busbw[7]  # still rising past 128 MiB: the sweep's top is its peak
        got = _busbw_row(record)
        assert got.threshold == row.floor and got.passed is True and got.value > 2 * row.floor, name
    for name in ("collective-p2p-off.out", "collective-p2p-off-2.out"):
        got = _busbw_row(_collective(name))
        assert got.threshold == row.floor and got.passed is False, name


def test_the_bandwidth_floor_holds_only_where_it_was_measured() -> None:
    record = _collective("collective-1.out")
    assert floors_for(record) == {"max_busbw_gbps": 150.0}
    assert floors_for({**record, "device_name": "NVIDIA H100 PCIe"}) == {}  # other GPU, other links
    assert floors_for({**record, "config": {**record["config"], "max_bytes": 128 << 20}}) == {}  # short sweep
    assert floors_for({**record, "config": {**record["config"], "world_size": 1}}) == {}  # busbw 0 on 1 rank
    assert floors_for({**record, "config": {**record["config"], "backend": "gloo"}, "device": "cpu"}) == {}
    assert floors_for({**record, "config": {**record["config"], "world_size": 8}}) == {"max_busbw_gbps": 150.0}
