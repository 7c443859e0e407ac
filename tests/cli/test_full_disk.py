"""A full disk is the machine's problem, said as such (issue 41): exit 3 with the file and a
hint, not exit 70 "internal error", and nothing half-written is left."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def full_fs(tmp_path):
    """A 256 KiB tmpfs, filled up (root only; skipped where mounting is not allowed)."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError:
            pass
        finally:
            os.close(fd)
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_writing_to_a_full_disk_exits_3_naming_the_file(full_fs, tmp_path):
    out = full_fs / "requirements.txt"
    got = subprocess.run([sys.executable, "-m", "envbuild", "lock", "cpu-reference", "--target", "local",
                          "--format", "requirements", "-o", str(out)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "ENVBUILD_HOME": str(tmp_path / "home")})
    assert got.returncode == 3, got.stderr
    assert "No space left on device" in got.stderr and str(full_fs) in got.stderr and "internal error" not in got.stderr
    assert not out.exists() and [p.name for p in Path(full_fs).iterdir()] == ["filler"]
