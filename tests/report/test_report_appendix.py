"""The artifact appendix of a committed GPU run (`envbuild report DIR --appendix`, issue 39):
each checklist item with evidence or a stated gap, the benchmark judged again, md and html."""

from __future__ import annotations

import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

from envbuild.report.appendix import CHECKLIST
from support.paths import ROOT

RUN = ROOT / "docs" / "results" / "h200x4-run11" / "mapp-run3"


def report(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envbuild", "report", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "ENVBUILD_HOME": str(cwd / ".home")})


def rows(md: str) -> dict[str, list[str]]:
    return {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in md.splitlines()
            if line.startswith("| ") and " | " in line}


def test_a_recorded_gpu_runs_appendix_has_evidence_or_a_gap_for_every_item(tmp_path):
    got = report(str(RUN), "--appendix", cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    table = rows(got.stdout)
    for item, _, _ in CHECKLIST:
        assert item in table and (table[item][2] != "-" or table[item][3].rstrip(" |") != "-"), item
    assert "this run: 4 x NVIDIA H200" in table["hardware"][2]
    assert "PASS: iteration_time_ms = 2043.59 ms per iteration" in table["claims"][2]
    assert "of 3 run(s) recorded on 4 x NVIDIA H200" in table["claims"][2]
    assert "h200x4-run11/mapp-run2/native.out" in table["claims"][2]
    assert "not in this folder" in table["validation"][2]  # only the benchmark is judged again
    assert "| benchmark | `" in got.stdout and "the node had 4 GPU(s), 4 expected" in got.stdout


def test_the_appendix_as_html_escapes_and_holds_the_same_items(tmp_path):
    out = tmp_path / "appendix.html"
    got = report(str(RUN), "--appendix", "-o", str(out), cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    cells: list[str] = []

    class Cells(HTMLParser):
        def handle_data(self, data):
            cells.append(data)

    Cells().feed(out.read_text())
    assert all(item in cells for item, _, _ in CHECKLIST)
    assert "<script" not in out.read_text()


def test_a_folder_of_several_runs_is_refused_naming_one(tmp_path):
    got = report(str(RUN.parent), "--appendix", cwd=tmp_path)
    assert got.returncode == 2 and "h100x4-run9/alpa-run2" in got.stderr and "Traceback" not in got.stderr


def test_json_is_not_an_appendix_format(tmp_path):
    got = report(str(RUN), "--appendix", "--format", "json", cwd=tmp_path)
    assert got.returncode == 2 and "md or html" in got.stderr
