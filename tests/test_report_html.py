"""The HTML report in a real headless Chromium: it renders, shows the verdict, fetches nothing.

Needs Debian's ``chromium`` (.ci/report-deps.sh installs it).
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from envbuild.report import collect, render

pytestmark = pytest.mark.integration

SAMPLE = Path(__file__).parent / "data" / "runs" / "20261122-073000-alpa-megatron-h100-ubuntu2404"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, "chromium is not installed: run .ci/report-deps.sh (apt-get install -y chromium)"
    return path


def run_chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    return subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def decode_png(data: bytes) -> tuple[int, int, int, bytes]:
    """(width, height, channels, raw pixel bytes) of an 8-bit RGB/RGBA PNG (zlib only)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), (depth, color)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride = zlib.decompress(idat), width * channels
    out, prev = bytearray(), bytearray(stride)
    for y in range(height):
        ftype, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 255
            elif ftype == 2:
                line[i] = (line[i] + b) & 255
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out += line
        prev = line
    return width, height, channels, bytes(out)


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
    width, height, channels, px = decode_png(shot.read_bytes())
    assert (width, height) == (1280, 2000)
    pixels = [px[i:i + 3] for i in range(0, len(px), channels)]
    non_white = sum(1 for rgb in pixels if min(rgb) < 235)
    red = sum(1 for r, g, b in pixels if r > 180 and g < 80 and b < 80)  # the FAIL banner and bar
    assert non_white > 0.03 * len(pixels), f"only {non_white} non-white pixels"
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
