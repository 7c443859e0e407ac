"""bench/gpu_cold.py: issue 52's rows read from a lease's run folders, figures only from runs that went
to their end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import gpu_cold  # noqa: E402

from envbuild.facts.model import Gpu, NodeFacts  # noqa: E402
from envbuild.record import RunInfo  # noqa: E402
from envbuild.plan.model import Plan, Step  # noqa: E402
from envbuild.plan.params import ApexBuildParams  # noqa: E402
from envbuild.record.run import BundleRecord  # noqa: E402

WORDS = {0: "PASS", 1: "FAIL", 5: "NOT JUDGED"}


def _folder(folder: Path, name: str, run: dict, events: list[tuple[str, str]] = (), gpus: int = 1,
            keys: list[str] = ()) -> None:
    d = folder / name
    (d / "nodes" / "local").mkdir(parents=True)
    # the node's plan builds one Apex wheel per key (ApexBuildParams.cache_key)
    steps = [Step(id=f"apex:{k}", title="apex", params=ApexBuildParams(
        dest="/p/src/apex", argv=["pip", "install", "."], wheel_argv=["pip", "wheel", "."], env={}, cache_key=k,
        wheel_dir=f"/p/.envbuild/wheels/{k}", options=[])) for k in keys]
    (d / "nodes" / "local" / "plan.json").write_text(
        Plan(recipe="r", target="t", host="local", prefix="/p", backend="venv", steps=steps).to_json())
    # and ran them in this run (the node's result.json: the steps it changed)
    (d / "nodes" / "local" / "result.json").write_text(json.dumps({"status": "ok", "changed": [s.id for s in steps]}))
    (d / "run.json").write_text(json.dumps(run))
    (d / "events.jsonl").write_text("".join(
        json.dumps({"step": step, "kind": kind, "ts": ts}) + "\n"
        for ts, (step, kind) in enumerate([("apex:apex", "start"), *events, ("apex:apex", "changed")])))
    facts = NodeFacts(host="local", gpus=[Gpu(index=i, name="NVIDIA H200", compute_capability="9.0")
                                          for i in range(gpus)])
    (d / "nodes" / "local" / "facts.json").write_text(facts.model_dump_json(by_alias=True))


def _run(folder: Path, name: str, started: str, finished: str, *, exit_code: int, from_step: str | None = None,
         smoke: bool = False, events: list[tuple[str, str]] = (), prebuilt: list[str] = (), gpus: int = 1,
         status: str | None = None, carried: list[str] = (), not_used: list[str] = (),
         planned: list[str] | None = None, phase_s: dict[str, float] | None = None) -> None:
    """A run folder whose run.json is a record as provision writes it (validated by ``RunInfo``)."""
    run = RunInfo(run_id=name, recipe="r", target="t", argv=["envbuild", "provision", "r"], started=started,
                  finished=finished, status=status or ("ok" if exit_code in WORDS else "failed"),
                  exit_code=exit_code, verdict=WORDS.get(exit_code, "FAIL"),
                  options={"from_step": from_step, "smoke": smoke},
                  bundle=BundleRecord(file="b.tar", digest="0" * 64, prebuilt=list(carried),
                                      prebuilt_seeded=list(prebuilt), prebuilt_not_used=list(not_used)),
                  phase_s=phase_s or {})
    keys = sorted({*carried, *prebuilt}) if planned is None else planned
    _folder(folder, name, run.model_dump(mode="json", by_alias=True), events, gpus, keys)


def test_a_lease_gives_its_cold_noop_and_benchmark_figures(tmp_path) -> None:
    lease = tmp_path / "lease"
    # k0 carried, but another bundle of the lease had seeded it first; k2 shadowed by another wheel
    # in the controller's cache; k3 carried, but no node's plan builds it: neither installed
    _run(lease, "a-cold", "2026-11-27T10:00:00+0000", "2026-11-27T10:07:00+0000", exit_code=5, prebuilt=["k1"],
         carried=["k0", "k1", "k2", "k3"], not_used=["k2"], planned=["k0", "k1", "k2"])
    _run(lease, "b-noop", "2026-11-27T10:08:00+0000", "2026-11-27T10:08:04+0000", exit_code=5,
         events=[("environment", "skipped")], phase_s={"facts": 2.5, "probe": 1.0})
    _run(lease, "c-first", "2026-11-27T10:09:00+0000", "2026-11-27T10:12:00+0000", exit_code=0, from_step="smoke",
         smoke=True)
    _run(lease, "d-second", "2026-11-27T10:13:00+0000", "2026-11-27T10:15:00+0000", exit_code=1, from_step="smoke",
         smoke=True)
    (row,) = gpu_cold.rows([lease])
    assert (row["cold_s"], row["noop_s"], row["first_run_s"], row["second_run_s"]) == (420.0, 4.0, 180.0, 120.0)
    assert row["noop_phase_s"] == {"facts": 2.5, "probe": 1.0}  # the no-op's own run.json, not the cold run's
    # wall times of runs with any verdict: each figure says its run's
    assert (row["first_run_verdict"], row["second_run_verdict"]) == ("PASS", "FAIL")
    assert (row["gpu"], row["gpus"], row["prebuilt"]) == ("NVIDIA H200", 1, ["k0", "k1"])
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
    assert (row["first_run_verdict"], row["second_run_verdict"]) == (None, None)
    assert [(r["s"], r["exit_code"], r["verdict"]) for r in row["runs"]] == [(65.0, 5, "NOT JUDGED"), (152.0, 4, "FAIL")]


def test_a_run_refused_by_preflight_gives_no_figure(tmp_path) -> None:
    lease = tmp_path / "lease"
    _run(lease, "a-cold", "2026-11-27T10:00:00+0000", "2026-11-27T10:07:00+0000", exit_code=5)
    # refused: exit 1 as a FAIL verdict is, but no node was ok (status failed): it stopped before the benchmark
    _run(lease, "b-refused", "2026-11-27T10:09:00+0000", "2026-11-27T10:09:05+0000", exit_code=1,
         from_step="smoke", smoke=True, status="failed")
    (row,) = gpu_cold.rows([lease])
    assert (row["first_run_s"], row["first_run_verdict"]) == (None, None)
    assert [(r["exit_code"], r["verdict"]) for r in row["runs"]] == [(5, "NOT JUDGED"), (1, "FAIL")]


def _old_record(name: str, started: str, finished: str, verdict: str, options: dict) -> dict:
    """run.json as envbuild wrote it before the typed record (envbuild.run/1, as
    docs/results/h100-offline-run5/run.json holds it): no ``schema``, no ``exit_code``."""
    return {"run_id": name, "recipe": "r", "target": "t", "envbuild_version": "0.1.0",
            "argv": ["envbuild", "provision", "r"], "started": started, "finished": finished, "status": "ok",
            "hosts": ["local"], "options": options, "verdict": verdict, "verdict_reasons": [],
            "verdict_not_judged": []}


def test_an_older_record_is_read_through_the_migration(tmp_path) -> None:
    lease = tmp_path / "lease"
    _folder(lease, "a-cold", _old_record("a-cold", "2026-11-26T01:00:00+0000", "2026-11-26T01:08:00+0000",
                                         "NOT JUDGED", {"smoke": False, "from_step": None}))
    _folder(lease, "b-first", _old_record("b-first", "2026-11-26T01:09:00+0000", "2026-11-26T01:11:30+0000",
                                          "PASS", {"smoke": True, "from_step": "smoke"}))
    (row,) = gpu_cold.rows([lease])
    # no exit code was recorded then: the run's own verdict says it went to its end
    assert (row["cold_s"], row["first_run_s"], row["first_run_verdict"]) == (480.0, 150.0, "PASS")
    assert [(r["exit_code"], r["verdict"]) for r in row["runs"]] == [(None, "NOT JUDGED"), (None, "PASS")]


def test_a_record_envbuild_does_not_read_is_refused_not_misread(tmp_path) -> None:
    newer = tmp_path / "newer"
    _run(newer, "a-cold", "2026-11-27T10:00:00+0000", "2026-11-27T10:07:00+0000", exit_code=5)
    run_json = newer / "a-cold" / "run.json"
    run_json.write_text(json.dumps({**json.loads(run_json.read_text()), "schema": "envbuild.run/9"}))
    damaged = tmp_path / "damaged"
    _run(damaged, "a-cold", "2026-11-27T10:00:00+0000", "2026-11-27T10:07:00+0000", exit_code=5)
    (damaged / "a-cold" / "run.json").write_text(json.dumps({"argv": ["envbuild", "provision", "r"], "recipe": "r",
                                                             "started": "2026-11-27T10:00:00+0000",
                                                             "finished": "2026-11-27T10:07:00+0000"}))
    for lease, why in ((newer, "schema 'envbuild.run/9'"), (damaged, "status: Field required")):
        out = tmp_path / f"{lease.name}.json"
        p = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_cold.py"), str(lease), "-o", str(out)],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and str(lease / "a-cold" / "run.json") in p.stderr and why in p.stderr, p.stderr
        assert not out.exists()


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


@pytest.mark.parametrize("after, counted", [
    ("none of its 9 file(s) changed after the restore; written again with the same bytes: megatron/build/build.ninja",
     True),
    ("3 of its 9 file(s) changed after the restore: megatron/build/.ninja_log, megatron/build/a.o, megatron/build/a.so",
     False),
    ("", False)])  # a record from before the save said what changed: not shown, not counted
@pytest.mark.parametrize("tag", ["build outputs (tree-megatron-k):", "build outputs:"])  # runs 16-17: no key
def test_restored_names_the_build_outputs_the_cold_install_restored_not_those_it_built(tmp_path, after, counted,
                                                                                      tag) -> None:
    """``restored``: a source's build step whose node log says its outputs came from the build cache
    (envbuild.node.treecache.restore's line) and that the build then changed none of them (the save's
    line); a build that made them, or redid part of them, or another step's line, is not."""
    from envbuild.plan.params import BuildParams

    lease = tmp_path / "lease"
    _run(lease, "a-cold", "2026-11-27T10:00:00+0000", "2026-11-27T10:01:00+0000", exit_code=5)
    node = lease / "a-cold" / "nodes" / "local"
    steps = [Step(id=f"build:{n}", title=n, params=BuildParams(name=n, dest=f"/p/src/{n}", commands=["make"],
                                                               outputs=[f"{n}/build"], cache_key=f"tree-{n}-k"))
             for n in ("megatron", "other")]
    (node / "plan.json").write_text(Plan(recipe="r", target="t", host="local", prefix="/p", backend="venv",
                                         steps=steps).to_json())
    (node / "log.txt").write_text(
        "TASK [Restore the build outputs]\n"
        f"{tag} 9 file(s) of megatron/build restored from the build cache; 40 file(s) of the tree dated before them\n"
        "$ bash -ec ninja\n"
        f"{tag} the cached archive outputs.tar stays (restored before the build); {after}\n"
        "TASK [Restore the build outputs]\nbuild outputs (tree-other-k): none cached for this key, the build makes them\n"
        "build outputs (tree-other-k): 9 file(s) of other/build saved for the next node\n")
    (row,) = gpu_cold.rows([lease])
    assert row["restored"] == (["tree-megatron-k"] if counted and "(" in tag else [])
