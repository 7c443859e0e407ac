"""Run a shell command on the controller itself (the ``local`` node)."""

from __future__ import annotations

import subprocess


def run_local(command: str, *, timeout: float = 300) -> tuple[int, str, str]:
    """``sh -c command``; returns (rc, stdout, stderr). rc 124 when it timed out."""
    try:
        p = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        return 124, exc.stdout or "", (exc.stderr or "") + f"\ntimed out after {timeout:.0f} s"
    return p.returncode, p.stdout, p.stderr
