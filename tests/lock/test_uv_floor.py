"""The lowest uv that pyproject.toml allows runs the lock command envbuild builds.

uv at exactly the floor (``uv tool run --from uv==FLOOR``: PyPI through uv's cache) resolves a
small request with every option ``uv_command`` passes (pylock output, --excludes, --exclude-newer,
static dependency metadata in the config file, the manylinux platform); one release below the
floor lacks ``--excludes``, so the floor is the first that works, not merely one that does.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.version import Version

from envbuild.lock.uvresolve import UvRequest, parse_pylock, uv_command, uv_config
from support.paths import ROOT

pytestmark = pytest.mark.integration



def floor() -> Version:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    [spec] = [d for d in deps if re.match(r"uv\b", d)]
    return Version(re.fullmatch(r"uv>=([\w.]+)(?:,<[\w.]+)?", spec).group(1))


def compile_with(version: str, tmp: Path) -> subprocess.CompletedProcess:
    req = UvRequest(requirements=("six",), python="3.11", python_platform="x86_64-manylinux_2_28",
                    exclude_newer="2025-06-01T00:00:00Z", excludes=("wheel",),
                    no_build_metadata=(("flash-attn", "2.0.0"),))
    (tmp / "req.in").write_text("six\n")
    (tmp / "excludes.txt").write_text("wheel\n")
    (tmp / "uv.toml").write_text(uv_config(req))
    argv = uv_command(req, tmp / "req.in", tmp / "excludes.txt", "pylock.toml", tmp / "cache", tmp / "uv.toml")
    assert argv[0] == "uv"
    run_uv = [sys.executable, "-m", "uv", "tool", "run", "-q", "--from", f"uv=={version}", "uv"]
    return subprocess.run(run_uv + argv[1:], capture_output=True, text=True, timeout=300)


def test_the_floor_runs_envbuilds_uv_command(tmp_path):
    r = compile_with(str(floor()), tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "six" in parse_pylock(r.stdout)


def test_the_release_before_the_floor_does_not(tmp_path):
    low = floor()
    below = f"{low.major}.{low.minor}.{low.micro - 1}"
    r = compile_with(below, tmp_path)
    assert r.returncode != 0 and "--excludes" in r.stderr, r.stderr[-2000:]
