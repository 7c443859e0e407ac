"""collect(): the verdict and its reasons, fingerprints, and the `envbuild report` command."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from envbuild.cli import main
from envbuild.report import collect, render
from support.paths import DATA

SAMPLE = DATA / "runs" / "20261122-073000-alpa-megatron-h100-ubuntu2404"


def edit(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


@pytest.fixture
def run(tmp_path) -> Path:
    dest = tmp_path / "runs" / SAMPLE.name
    shutil.copytree(SAMPLE, dest)
    return dest


def make_clean(run: Path) -> None:
    """gpu-b gets gpu-a's observed state and benchmark numbers."""
    a, b = run / "nodes" / "gpu-a", run / "nodes" / "gpu-b"
    obs = json.loads((a / "observed.json").read_text())
    obs["host"] = "gpu-b"
    (b / "observed.json").write_text(json.dumps(obs))
    shutil.copy(a / "smoke.json", b / "smoke.json")


def test_clean_run_passes_and_identical_nodes_share_a_fingerprint(run):
    make_clean(run)
    report = collect(run)
    assert report.verdict.status == "PASS" and report.verdict.reasons == []
    fa, fb = (n.fingerprint for n in report.nodes)
    assert fa == fb and len(fa) == 64
    assert "## Verdict: PASS" in render(report, "md")


def test_fingerprint_ignores_run_id_timestamps_and_hostnames(run, tmp_path):
    make_clean(run)
    first = collect(run).fingerprint
    other = tmp_path / "runs" / "20270101-000000-alpa-megatron-h100-ubuntu2404"
    shutil.copytree(run, other)
    edit(other / "run.json", run_id=other.name, started="2027-01-01T00:00:00Z", finished="2027-01-01T01:00:00Z")
    for node in ("gpu-a", "gpu-b"):
        edit(other / "nodes" / node / "observed.json", host=f"renamed-{node}")
    assert collect(other).fingerprint == first
    edit(other / "nodes" / "gpu-a" / "observed.json", packages={"six": "1.16.0"})
    assert collect(other).fingerprint != first


def test_preflight_refusal_and_failed_step_are_reasons(run):
    node = run / "nodes" / "gpu-a"
    (node / "preflight.json").write_text(json.dumps({
        "verdict": "infeasible", "feasible": False,
        "violations": [{"id": "cuda-major", "severity": "error", "message": "nvcc 13.0 cannot build for torch cu111",
                        "fix": "use a CUDA 11 toolkit"}]}))
    edit(node / "result.json", status="failed", failed_step="apex", rc=1, command="pip install ./apex")
    (node / "observed.json").unlink()
    report = collect(run)
    kinds = [(r.kind, r.host) for r in report.verdict.reasons]
    assert ("preflight", "gpu-a") in kinds and ("step", "gpu-a") in kinds
    assert report.fingerprint is None  # a node without observed state: no run fingerprint
    md = render(report, "md")
    assert "nvcc 13.0 cannot build for torch cu111 (fix: use a CUDA 11 toolkit)" in md
    assert "at `apex` (rc 1): `pip install ./apex`" in md


def test_missing_observed_state_fails_an_ok_node(run):
    (run / "nodes" / "gpu-a" / "observed.json").unlink()
    reasons = collect(run).verdict.reasons
    assert any(r.kind == "unobserved" and r.host == "gpu-a" for r in reasons)


def test_reverted_patch_and_moved_commit_are_drift(run):
    path = run / "nodes" / "gpu-a" / "observed.json"
    obs = json.loads(path.read_text())
    obs["patches"][0]["status"] = "reverted"
    obs["git"]["megatron"] = "0" * 40
    path.write_text(json.dumps(obs))
    kinds = {d.kind for d in collect(run).nodes[0].drift}
    assert kinds == {"patch-missing", "commit-moved"}


def test_cli_report_writes_each_format(run, tmp_path, monkeypatch, capsys):
    make_clean(run)
    monkeypatch.setenv("ENVBUILD_HOME", str(tmp_path))
    (tmp_path / "runs" / "latest").symlink_to(run.name)
    assert main(["report", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["run"]["run_id"] == SAMPLE.name
    out = tmp_path / "r.html"
    assert main(["report", str(run), "-o", str(out)]) == 0
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_cli_report_exit_code_follows_the_verdict(run, tmp_path, capsys):
    """The sample as shipped fails (drift on gpu-b, a benchmark below threshold): exit 1, with
    the whole report still written; an interrupted run fails too."""
    assert collect(run).verdict.status == "FAIL"
    assert main(["report", str(run)]) == 1
    cap = capsys.readouterr()
    assert "## Verdict: FAIL" in cap.out and "verdict: FAIL" in cap.err
    out = tmp_path / "r.json"
    assert main(["report", str(run), "-o", str(out)]) == 1
    assert json.loads(out.read_text())["verdict"]["status"] == "FAIL"
    make_clean(run)
    assert main(["report", str(run)]) == 0
    edit(run / "run.json", status="interrupted")
    assert main(["report", str(run)]) == 1


def test_cli_report_missing_run_dir_is_one_line_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ENVBUILD_HOME", str(tmp_path))
    assert main(["report"]) == 2
    err = capsys.readouterr().err
    assert "error: no run directory at" in err and "hint:" in err and "Traceback" not in err
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "is not a run directory" in capsys.readouterr().err


def test_damaged_run_file_is_input_error(run, capsys):
    (run / "nodes" / "gpu-a" / "smoke.json").write_text("{not json")
    assert main(["report", str(run)]) == 2
    assert "smoke.json: not valid JSON" in capsys.readouterr().err


def test_a_failed_native_verdict_fails_without_a_threshold_and_a_missing_run_is_not_judged(run):
    """A native verdict of fail (its metric not in the output) is FAIL even where the recipe
    sets no threshold; a benchmark that did not run is NOT JUDGED, never FAIL or PASS."""
    make_clean(run)
    recipe = json.loads((run / "recipe.json").read_text())
    recipe["benchmark"]["threshold"] = None
    (run / "recipe.json").write_text(json.dumps(recipe))
    smoke_file = run / "nodes" / "gpu-a" / "smoke.json"
    smoke = json.loads(smoke_file.read_text())
    native = smoke["native"]
    native["metrics"] = {}
    native["threshold"] = None
    native["verdict"] = {"status": "fail", "metric": "elapsed_time_per_iteration_ms", "value": None, "threshold": None,
                         "passed": False, "reason": "metric not found in the log (metrics found: none)",
                         "completion": {"state": "complete", "detail": "ok"}}
    smoke_file.write_text(json.dumps(smoke))
    report = collect(run)
    assert report.verdict.status == "FAIL"
    assert [(r.kind, r.host, r.message) for r in report.verdict.reasons] == [
        ("benchmark", "gpu-a", "metric not found in the log (metrics found: none)")]
    smoke["native"] = {"parser": "megatron-pretrain", "metric": "elapsed_time_per_iteration_ms", "ran": False,
                       "reason": "needs 8 GPUs, the node has 0"}
    smoke_file.write_text(json.dumps(smoke))
    report = collect(run)
    assert report.verdict.status == "NOT JUDGED" and report.verdict.reasons == []
    assert "gpu-a: the recipe's benchmark did not run (needs 8 GPUs, the node has 0)" in report.verdict.not_judged
    assert main(["report", str(run)]) == 5


def test_a_pass_never_stands_beside_a_badge_that_says_no(run):
    """A launched job's smoke.json holds only the recipe's benchmark, which met its threshold
    and (with the native section carrying no ``ok``) did not count as the Functional badge's
    exercise: the banner said PASS beside "Functional: no". The verdict now needs every
    Functional criterion: NOT JUDGED, naming the one not met; a PASS is left only where the
    badge is supported. (Results Reproduced asks the published figure on its hardware: a
    verdict never waits for it, envbuild.report.badges.)"""
    make_clean(run)
    for node in ("gpu-a", "gpu-b"):
        smoke_file = run / "nodes" / node / "smoke.json"
        smoke = json.loads(smoke_file.read_text())
        smoke_file.write_text(json.dumps({"native": smoke["native"]}))  # as launch --submit wrote it
    report = collect(run)
    badges = {b.id: b for b in report.badges}
    assert not badges["functional"].supported
    assert report.verdict.status == "NOT JUDGED" and report.verdict.reasons == []
    assert any("the smoke trained and all-reduced on every node: not met" in n for n in report.verdict.not_judged)
    assert "## Verdict: PASS" not in render(report, "md")
    # the job's completed training counts as the exercise (launch --submit's native "ok"): PASS
    for node in ("gpu-a", "gpu-b"):
        smoke_file = run / "nodes" / node / "smoke.json"
        smoke = json.loads(smoke_file.read_text())
        smoke["native"]["ok"] = True
        smoke_file.write_text(json.dumps(smoke))
    report = collect(run)
    badges = {b.id: b for b in report.badges}
    assert report.verdict.status == "PASS" and badges["functional"].supported
    assert not badges["reproduced"].supported  # the sample's threshold holds on any hardware: not the authors' figure
