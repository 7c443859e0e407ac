"""envbuild diff: two reports (JSON files or run dirs), what differs, exit 1 when environments do."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from envbuild.cli import main
from envbuild.report import collect, render
from envbuild.report.diff import diff_reports, environments_differ
from support.paths import DATA

SAMPLE = DATA / "runs" / "20261122-073000-alpa-megatron-h100-ubuntu2404"


def copy_run(tmp_path: Path, name: str) -> Path:
    dest = tmp_path / name
    shutil.copytree(SAMPLE, dest)
    return dest


def set_json(path: Path, key: str, value) -> None:
    data = json.loads(path.read_text())
    data[key] = value
    path.write_text(json.dumps(data))


def test_same_run_twice_is_identical(tmp_path, capsys):
    a = tmp_path / "a.json"
    a.write_text(render(collect(SAMPLE), "json"))
    assert diff_reports(collect(SAMPLE), collect(SAMPLE)) == []
    assert main(["diff", str(a), str(SAMPLE)]) == 0
    assert "identical" in capsys.readouterr().out


def test_package_and_driver_changes_make_environments_differ(tmp_path, capsys):
    b = copy_run(tmp_path, "b")
    obs = json.loads((b / "nodes" / "gpu-a" / "observed.json").read_text())
    obs["packages"]["six"] = "1.16.0"
    (b / "nodes" / "gpu-a" / "observed.json").write_text(json.dumps(obs))
    set_json(b / "nodes" / "gpu-a" / "facts.json", "driver_version", "580.65.06")
    diffs = diff_reports(collect(SAMPLE), collect(b))
    areas = {(d.area, d.host, d.subject) for d in diffs}
    assert ("fingerprint", None, "environment") in areas
    assert ("package", "gpu-a", "six") in areas and ("facts", "gpu-a", "driver") in areas
    assert environments_differ(diffs)
    assert main(["diff", str(SAMPLE), str(b), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["environments_differ"] is True
    assert {"area": "package", "host": "gpu-a", "subject": "six", "a": "1.17.0", "b": "1.16.0",
            "environment": True} in out["differences"]


def test_benchmark_numbers_alone_do_not_make_environments_differ(tmp_path, capsys):
    b = copy_run(tmp_path, "b")
    smoke = json.loads((b / "nodes" / "gpu-a" / "smoke.json").read_text())
    smoke["gpt"]["tokens_per_s"] = smoke["gpt"]["tokens_per_s"] * 0.9
    (b / "nodes" / "gpu-a" / "smoke.json").write_text(json.dumps(smoke))
    diffs = diff_reports(collect(SAMPLE), collect(b))
    assert [(d.area, d.subject) for d in diffs] == [("benchmark", "gpt.tokens_per_s")]
    assert not environments_differ(diffs)
    assert main(["diff", str(SAMPLE), str(b)]) == 0
    assert "only numbers differ" in capsys.readouterr().out


def test_diff_rejects_what_is_not_a_report(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"schema": "envbuild.lock/1"}))
    assert main(["diff", str(bad), str(SAMPLE)]) == 2
    err = capsys.readouterr().err
    assert "not an envbuild.report/1 document" in err and "hint:" in err
