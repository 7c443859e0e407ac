"""A real headless Chromium for tests of the HTML report: screenshots and the DOM it renders.

Debian's ``chromium`` runs as root with the flags below and a fresh profile per call (the
background-networking flags keep it from trying hosts that cannot be reached). ``decode_png``
reads the screenshot back (8-bit RGB/RGBA, zlib only) so a test can look at pixels.

    shot = screenshot(Path("report.html"), tmp_path / "report.png")
    png = decode_png(shot.read_bytes())
    assert png.longest_run((46, 133, 64), rows=range(0, 300)) > 800   # a wide green banner
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium() -> str | None:
    """The browser's path, None when it is not installed (.ci/report-deps.sh installs it)."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def run_chromium(profile: Path, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    """Chromium with the test flags and the fresh profile folder ``profile``."""
    path = chromium()
    if path is None:
        raise FileNotFoundError("chromium is not installed: run .ci/report-deps.sh (apt-get install -y chromium)")
    return subprocess.run([path, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def screenshot(html: Path, png: Path, width: int = 1280, height: int = 2000) -> subprocess.CompletedProcess:
    """Render ``html`` and write a ``width`` x ``height`` PNG to ``png``."""
    return run_chromium(png.with_suffix(".profile"), f"--screenshot={png}", f"--window-size={width},{height}",
                        html.resolve().as_uri())


def dump_dom(html: Path, profile: Path) -> subprocess.CompletedProcess:
    """The DOM Chromium builds from ``html`` (stdout)."""
    return run_chromium(profile, "--dump-dom", html.resolve().as_uri())


@dataclass
class Png:
    width: int
    height: int
    channels: int
    pixels: bytes  # rows of width * channels bytes

    def rgb(self, x: int, y: int) -> tuple[int, int, int]:
        i = (y * self.width + x) * self.channels
        return self.pixels[i], self.pixels[i + 1], self.pixels[i + 2]

    def count(self, predicate) -> int:  # noqa: ANN001 - a function of (r, g, b)
        c, px = self.channels, self.pixels
        return sum(1 for i in range(0, len(px), c) if predicate(px[i], px[i + 1], px[i + 2]))

    def longest_run(self, color: tuple[int, int, int], rows, tol: int = 10) -> tuple[int, int]:
        """(length, row) of the longest horizontal run of ``color`` (within ``tol`` per channel)."""
        best = (0, -1)
        for y in rows:
            run = 0
            for x in range(self.width):
                if all(abs(a - b) <= tol for a, b in zip(self.rgb(x, y), color)):
                    run += 1
                    if run > best[0]:
                        best = (run, y)
                else:
                    run = 0
        return best


def decode_png(data: bytes) -> Png:
    """The pixels of an 8-bit RGB/RGBA PNG (no interlace)."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, width, height, channels = 8, b"", 0, 0, 3
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            if depth != 8 or color not in (2, 6):
                raise ValueError(f"unsupported PNG: depth {depth}, color type {color}")
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
    return Png(width, height, channels, bytes(out))
