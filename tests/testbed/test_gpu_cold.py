"""bench/gpu_cold.py: issue 52's rows read from a lease's run folders, figures only from runs that went
to their end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.paths import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import gpu_cold  # noqa: E402


def _run(folder: Path, name: str, started: str, finished: str, *, exit_code: int, from_step: str | None = None,
         smoke: bool = False, events: list[tuple[str, str]] = (), prebuilt: list[str] = (), gpus: int = 1) -> None:
    d = folder / name
    (d / "nodes" / "local").mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({
        "argv": ["envbuild", "provision", "r"], "recipe": "r", "started": started, "finished": finished,
        "exit_code": exit_code, "verdict": {0: "PASS", 1: "FAIL", 5: "NOT JUDGED"}.get(exit_code, "FAIL"),
        "options": {"from_step": from_step, "smoke": smoke}, "bundle": {"prebuilt_seeded": list(prebuilt)}}))
    (d / "events.jsonl").write_text("".join(
        json.dumps({"step": step, "kind": kind, "ts": ts}) + "\n"
        for ts, (step, kind) in enumerate([("apex:apex", "start"), *events, ("apex:apex", "changed")])))
    (d / "nodes" / "local" / "facts.json").write_text(json.dumps({"gpus": [{"name": "NVIDIA H200"}] * gpus}))


def test_a_lease_gives_its_cold_noop_and_benchmark_figures(tmp_path) -> None:
    lease = tmp_path / "lease"
    _run(lease, "a-cold", "2026-11-27T10:00:00+0000", "2026-11-27T10:07:00+0000", exit_code=5, prebuilt=["k1"])
    _run(lease, "b-noop", "2026-11-27T10:08:00+0000", "2026-11-27T10:08:04+0000", exit_code=5,
         events=[("environment", "skipped")])
    _run(lease, "c-first", "2026-11-27T10:09:00+0000", "2026-11-27T10:12:00+0000", exit_code=0, from_step="smoke",
         smoke=True)
    _run(lease, "d-second", "2026-11-27T10:13:00+0000", "2026-11-27T10:15:00+0000", exit_code=1, from_step="smoke",
         smoke=True)
    (row,) = gpu_cold.rows([lease])
    assert (row["cold_s"], row["noop_s"], row["first_run_s"], row["second_run_s"]) == (420.0, 4.0, 180.0, 120.0)
    assert (row["gpu"], row["gpus"], row["prebuilt"]) == ("NVIDIA H200", 1, ["k1"])
    assert [r["kind"] for r in row["runs"]] == ["install", "install", "benchmark", "benchmark"]


def test_no_figure_from_a_run_that_stopped_or_a_node_that_was_not_cold(tmp_path) -> None:
    lease = tmp_path / "lease"
    # the node held the environment already: its steps ran again over it (run 13's second bundle)
    _run(lease, "a-again", "2026-11-27T10:00:00+0000", "2026-11-27T10:01:05+0000", exit_code=5,
         events=[("apex:apex", "rerun")])
    _run(lease, "b-bench", "2026-11-27T10:02:00+0000", "2026-11-27T10:04:32+0000", exit_code=4, from_step="smoke",
         smoke=True)  # the benchmark died (exit 4): no figure
    (row,) = gpu_cold.rows([lease])
    assert (row["cold_s"], row["noop_s"], row["first_run_s"], row["second_run_s"]) == (None, None, None, None)
    assert [(r["s"], r["exit_code"]) for r in row["runs"]] == [(65.0, 5), (152.0, 4)]


def test_the_command_appends_rows_and_refuses_a_folder_without_runs(tmp_path) -> None:
    lease = tmp_path / "lease"
    _run(lease, "a-cold", "2026-11-27T10:00:00+0000", "2026-11-27T10:00:30+0000", exit_code=5)
    out = tmp_path / "gpu-cold.json"
    for _ in range(2):
        p = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_cold.py"), str(lease), "-o", str(out)],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
    assert [r["cold_s"] for r in json.loads(out.read_text())["rows"]] == [30.0, 30.0]
    (tmp_path / "empty").mkdir()
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_cold.py"), str(tmp_path / "empty")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "no envbuild provision run folder" in p.stderr
