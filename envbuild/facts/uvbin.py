"""The controller's uv as a fact: which binary ``uv.find_uv_bin()`` finds, its version, sha256,
OS, architecture and C library; what the planner needs to push it to a node
(``envbuild.plan.installer``).

A command (``uv --version``) and its wheel's tags, read by a pure parser:

    >>> b = parse_uv("uv 0.13.9 (x86_64-unknown-linux-gnu)", "Tag: py3-none-manylinux_2_17_x86_64\\n", "ab" * 32)
    >>> (b.version, b.os, b.arch, b.libc, b.glibc_min)
    ('0.13.9', 'linux', 'x86_64', 'glibc', '2.17')
"""

from __future__ import annotations

import os
import re
import subprocess
from functools import lru_cache

from envbuild.facts.model import UvBinary
from envbuild.fsio import sha256_file

_VERSION = re.compile(r"^uv\s+(\d+\.\d+\.\d+\S*)(?:\s+\((?P<triple>[^)\s]+)[^)]*\))?", re.M)
_MANYLINUX = re.compile(r"^Tag:\s*\S+-\S+-manylinux_(\d+)_(\d+)_", re.M)


def parse_uv(version_out: str, wheel_text: str | None, sha256: str) -> UvBinary | None:
    """``uv --version`` output (``uv 0.13.9 (x86_64-unknown-linux-gnu)``; newer builds add a
    commit: ``uv 0.5.1 (f399a5271 2024-11-08)`` and no triple) and the WHEEL file of the
    ``uv`` distribution (its manylinux/musllinux tag) -> the binary; None when the output is
    not uv's or names no Linux build."""
    m = _VERSION.search(version_out or "")
    if not m:
        return None
    triple = m.group("triple") or ""
    tags = wheel_text or ""
    arch = libc = None
    if "-linux-" in triple:  # x86_64-unknown-linux-gnu, aarch64-unknown-linux-musl
        arch = triple.split("-", 1)[0]
        libc = "musl" if triple.endswith("musl") else "glibc"
    else:  # no triple in the version line: the wheel's platform tag says it
        t = re.search(r"^Tag:\s*\S+-\S+-(manylinux|musllinux)_\d+_\d+_(\w+)", tags, re.M)
        if t:
            arch, libc = t.group(2), "musl" if t.group(1) == "musllinux" else "glibc"
    if arch is None or libc is None:  # set together
        return None
    g = _MANYLINUX.search(tags)
    # a glibc build whose wheel tag is unknown: its minimum glibc is unknown, and the planner
    # then keeps pip (fail closed)
    glibc_min = f"{g.group(1)}.{g.group(2)}" if g and libc == "glibc" else None
    return UvBinary(version=m.group(1), sha256=sha256, os="linux", arch=arch, libc=libc,
                    glibc_min=glibc_min)


def find_uv() -> str | None:
    """The controller's uv binary as uv finds it (the ``uv`` package's own binary first)."""
    try:
        import uv

        return uv.find_uv_bin()
    except (ImportError, FileNotFoundError):
        return None



@lru_cache(maxsize=4)
def _described(path: str, size: int, mtime_ns: int) -> UvBinary | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    wheel = None
    try:
        from importlib.metadata import distribution

        dist = distribution("uv")  # its WHEEL tags, when this binary is the one it installed
        if any(os.path.realpath(str(dist.locate_file(f))) == path for f in dist.files or []
               if str(f).endswith("/uv") or str(f) == "uv"):
            wheel = dist.read_text("WHEEL")
    except Exception:  # noqa: BLE001 - no uv distribution: the version line alone
        wheel = None
    return parse_uv(out, wheel, sha256_file(path))


def controller_uv() -> tuple[str | None, UvBinary | None]:
    """(path, binary) of the controller's uv; (None, None) when there is none."""
    path = find_uv()
    if not path:
        return None, None
    try:
        st = os.stat(path)
    except OSError:
        return None, None
    return path, _described(os.path.realpath(path), st.st_size, st.st_mtime_ns)
