"""The HTML report in a real headless Chromium: it renders, shows the verdict, fetches nothing.

Needs Debian's ``chromium`` (.ci/report-deps.sh installs it).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from envbuild.report import collect, render
from envbuild.testbed.browser import chromium, decode_png, run_chromium as _run
from support.paths import DATA

pytestmark = pytest.mark.integration

SAMPLE = DATA / "runs" / "20261122-073000-alpa-megatron-h100-ubuntu2404"


def run_chromium(tmp_path: Path, *args: str):
    assert chromium(), "chromium is not installed: run .ci/report-deps.sh (apt-get install -y chromium)"
    return _run(tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}", *args)


@pytest.fixture(scope="module")
def html_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("html") / "report.html"
    path.write_text(render(collect(SAMPLE), "html"))
    return path


def test_html_is_self_contained(html_file):
    text = html_file.read_text()
    assert not re.search(r"<script|<link|<img|<iframe|@import|url\(|\s(src|href)=", text, re.I)
    assert "<svg" in text and "<details" in text and "<style>" in text


def test_chromium_screenshot_is_not_blank(html_file, tmp_path):
    shot = tmp_path / "report.png"
    p = run_chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", html_file.as_uri())
    assert shot.exists(), p.stderr[-2000:]
    png = decode_png(shot.read_bytes())
    assert (png.width, png.height) == (1280, 2000)
    non_white = png.count(lambda r, g, b: min(r, g, b) < 235)
    red = png.count(lambda r, g, b: r > 180 and g < 80 and b < 80)  # the FAIL banner and bars
    assert non_white > 0.03 * png.width * png.height, f"only {non_white} non-white pixels"
    assert red > 10_000, f"verdict banner not rendered red ({red} red pixels)"


def test_chromium_dom_has_verdict_and_tables(html_file, tmp_path):
    p = run_chromium(tmp_path, "--dump-dom", html_file.as_uri())
    assert p.returncode == 0, p.stderr[-2000:]
    dom = p.stdout
    assert re.search(r'id="verdict"[^>]*>Verdict: FAIL<', dom)
    for header in ("node", "GPU", "driver", "preflight", "provision", "pins", "benchmark", "threshold"):
        assert f"<th>{header}</th>" in dom, header
    assert "package-version: regex: expected 2024.11.6, found 2025.9.1" in dom
    assert "<svg" in dom and "elapsed_time_per_iteration_ms" in dom
