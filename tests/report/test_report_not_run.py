"""What a report and its appendix say of what a run did not do: a run with nothing to do (a no-op)
provisioned nothing, so its minutes are never compared with a provision's expected ones (the
appendix reads the run that provisioned, or says it cannot find it); a run made with
``provision --no-smoke`` ran no smoke, said as such, never as a smoke that failed on its nodes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from envbuild.recipes import load_recipe
from envbuild.report import appendix, collect, render
from support.paths import DATA

SAMPLE = DATA / "runs" / "20261122-073000-alpa-megatron-h100-ubuntu2404"
NOOP = "not started: every step done and its effect holds on every node"  # envbuild.provision.noop


def edit(path: Path, fn) -> None:
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


@pytest.fixture
def first(tmp_path) -> Path:
    """The sample run (alpa-megatron on gpu-a and gpu-b) in a runs folder, 8 minutes long."""
    dest = tmp_path / "runs" / SAMPLE.name
    shutil.copytree(SAMPLE, dest)
    edit(dest / "run.json", lambda r: r.update(started="2026-11-22T07:30:00Z", finished="2026-11-22T07:38:00Z"))
    return dest


def noop_after(earlier: Path, name: str) -> Path:
    """A later run of the same environment recorded as provision's no-op records it: no smoke,
    every step skipped, nothing changed, run.json's ``ansible`` saying why Ansible did not start."""
    later = earlier.parent / name
    shutil.copytree(earlier, later)
    for node in (later / "nodes").iterdir():
        (node / "smoke.json").unlink(missing_ok=True)
        edit(node / "result.json", lambda r: r.update(changed=[], skipped=["preflight", "environment"],
                                                       duration_s=2.0))
    edit(later / "run.json", lambda r: r.update(run_id=name, ansible=NOOP, started=f"{name[:4]}-{name[4:6]}-"
                                                f"{name[6:8]}T08:00:00Z", finished=f"{name[:4]}-{name[4:6]}-"
                                                f"{name[6:8]}T08:00:01Z"))
    return later


def provision_row(report) -> appendix.Experiment:
    appx = appendix.build(report, load_recipe(report.run.recipe), None)
    return next(e for e in appx.experiments if e.kind == "provision")


def test_the_appendix_of_a_noop_reads_the_run_that_provisioned(first):
    later = noop_after(first, "20261123-080000-alpa-megatron-h100-ubuntu2404")
    again = noop_after(later, "20261124-080000-alpa-megatron-h100-ubuntu2404")  # a no-op after a no-op
    cold = provision_row(collect(first))
    assert cold.measured.startswith("8.0 min from facts to report") and cold.check == "within the expected 10 min"
    for run in (later, again):
        report = collect(run)
        assert report.run.nothing_to_do == NOOP and report.run.provisioned_by.run_id == first.name
        row = provision_row(report)
        assert row.measured.startswith(f"this run provisioned nothing ({NOOP}); it took 1 s to find that"), row.measured
        assert f"provisioned by run `{first.name}`: 8.0 min from facts to report, smoke included" in row.measured
        assert row.check == f"run `{first.name}`: within the expected 10 min"
        assert "0.0 min" not in row.measured + row.check
        assert f"provisioned by run `{first.name}`" in render(report, "md")
    # a no-op whose provisioning run is not in its runs folder: said, never compared
    shutil.rmtree(first)
    row = provision_row(collect(again))
    assert "the run that provisioned this environment is not in this runs folder" in row.measured
    assert row.check == "not compared: a no-op's minutes are not a provision's"
    assert "within the expected" not in row.check and "0.0 min" not in row.measured


def test_a_noop_after_another_environment_does_not_read_that_runs_minutes(first):
    later = noop_after(first, "20261123-080000-alpa-megatron-h100-ubuntu2404")
    edit(first / "nodes" / "gpu-a" / "observed.json", lambda o: o["packages"].update(torch="0.0.1"))
    report = collect(later)
    assert report.run.provisioned_by is None
    assert "not in this runs folder" in provision_row(report).measured


def no_smoke(run: Path) -> None:
    """The run as ``provision --no-smoke`` records it: its options say smoke false, no smoke.json."""
    edit(run / "run.json", lambda r: r["options"].update(smoke=False))
    for node in (run / "nodes").iterdir():
        (node / "smoke.json").unlink()


def test_a_no_smoke_run_says_the_smoke_was_not_run(first):
    no_smoke(first)
    report = collect(first)
    functional = next(b for b in report.badges if b.id == "functional")
    exercised = next(c for c in functional.criteria if c.id == "exercised")
    assert not exercised.met
    assert exercised.evidence == "the smoke was not run (provision --no-smoke): nothing exercised the environment"
    assert "smoke ran and passed on" not in render(report, "md") + render(report, "html")
    assert "gpu-a: the recipe's benchmark did not run (the smoke was not run: provision --no-smoke)" \
        in report.verdict.not_judged
    assert "| smoke | not run (provision --no-smoke) |" in render(report, "md")
    appx = appendix.build(report, load_recipe("alpa-megatron"), None)
    rows = {e.kind: e for e in appx.experiments}
    assert "smoke not run (--no-smoke)" in rows["provision"].measured
    assert rows["benchmark"].measured == "the benchmark did not run in this run (provision --no-smoke)"
    # after a no-op, a node's smoke carries forward from the run before: only the other is unrun
    later = first.parent / "20261123-080000-alpa-megatron-h100-ubuntu2404"
    shutil.copytree(SAMPLE, first.parent / SAMPLE.name.replace("20261122-07", "20261121-07"))
    shutil.copytree(first, later)
    edit(later / "run.json", lambda r: r.update(run_id=later.name))
    edit(later / "nodes" / "gpu-a" / "result.json", lambda r: r.update(changed=[]))
    exercised = next(c for b in collect(later).badges if b.id == "functional" for c in b.criteria
                     if c.id == "exercised")
    assert exercised.evidence == ("the smoke was not run (provision --no-smoke): on gpu-b (the others' from an "
                                  "earlier run)")
    # a run with the smoke that did not pass on a node still says so, naming the node
    shutil.copy(SAMPLE / "nodes" / "gpu-a" / "smoke.json", first / "nodes" / "gpu-a" / "smoke.json")
    edit(first / "run.json", lambda r: r["options"].update(smoke=True))
    exercised = next(c for b in collect(first).badges if b.id == "functional" for c in b.criteria
                     if c.id == "exercised")
    assert exercised.evidence == "smoke ran and passed on 1 of 2 node(s): not on gpu-b"
