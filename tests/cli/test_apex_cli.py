"""`envbuild apex-patch` end to end, as a user runs it (a real process, real exit codes)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from support.clirun import envbuild as run_envbuild
from support.paths import DATA, ROOT

SHAPES = DATA / "apex_shapes"


def envbuild(*args: str) -> subprocess.CompletedProcess:
    return run_envbuild(*args, cwd=ROOT)


def apex_copy(tmp_path: Path, shape: str = "d_master_version") -> Path:
    dst = tmp_path / "apex"
    shutil.copytree(SHAPES / shape, dst)
    return dst


def test_dry_run_prints_decision_reason_and_diff_without_writing(tmp_path):
    src = apex_copy(tmp_path)
    before = (src / "setup.py").read_text()
    out = envbuild("apex-patch", str(src), "--nvcc", "11.4", "--torch-cuda", "11.3")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("decision: patched")
    assert "+++ b/setup.py" in out.stdout and "dry run" in out.stdout
    assert (src / "setup.py").read_text() == before


def test_apply_writes_then_second_apply_is_a_noop(tmp_path):
    src = apex_copy(tmp_path)
    first = envbuild("apex-patch", str(src), "--nvcc", "11.4", "--torch-cuda", "11.3", "--apply", "--json")
    assert first.returncode == 0
    rep = json.loads(first.stdout)
    assert rep["decision"] == "patched" and rep["applied"] is True and rep["digest"]
    patched = (src / "setup.py").read_text()
    assert "envbuild: major-only" in patched
    second = envbuild("apex-patch", str(src), "--nvcc", "11.4", "--torch-cuda", "11.3", "--apply")
    assert second.returncode == 0 and "already patched" in second.stdout
    assert (src / "setup.py").read_text() == patched
    assert not [p for p in src.iterdir() if p.name.endswith(".tmp")]


def test_equal_versions_unchanged(tmp_path):
    out = envbuild("apex-patch", str(apex_copy(tmp_path)), "--nvcc", "12.1", "--torch-cuda", "12.1", "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["decision"] == "unchanged"


def test_major_mismatch_refused_exit_1(tmp_path):
    out = envbuild("apex-patch", str(apex_copy(tmp_path)), "--nvcc", "10.2", "--torch-cuda", "11.1")
    assert out.returncode == 1
    assert "decision: refused" in out.stdout and "fix:" in out.stdout


def test_bad_input_exit_2_one_line_no_traceback(tmp_path):
    for args in ([str(tmp_path), "--nvcc", "11.4", "--torch-cuda", "11.3"],
                 [str(SHAPES / "not_apex"), "--nvcc", "11.4", "--torch-cuda", "11.3"],
                 [str(apex_copy(tmp_path)), "--nvcc", "eleven", "--torch-cuda", "11.3"]):
        out = envbuild("apex-patch", *args)
        assert out.returncode == 2, args
        assert out.stderr.startswith("error: ") and "hint: " in out.stderr
        assert "Traceback" not in out.stderr
