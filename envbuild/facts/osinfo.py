"""Operating-system facts: /etc/os-release, glibc (``ldd --version``), ``uname -m``, hostname."""

from __future__ import annotations

import re
import shlex

from envbuild.facts.probe import Probe

PROBES = [
    Probe("os_release", "cat /etc/os-release 2>/dev/null || cat /usr/lib/os-release"),
    Probe("glibc", "command -v ldd >/dev/null 2>&1 || exit 127\nldd --version 2>&1 | head -n 1"),
    Probe("uname", "uname -m"),
    Probe("hostname", "hostname 2>/dev/null || uname -n"),
]


def parse_os_release(text: str) -> dict[str, str]:
    """``/etc/os-release`` as a dict (quotes removed): ``{"ID": "ubuntu", "VERSION_ID": "24.04"}``."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        try:
            parts = shlex.split(value)
        except ValueError:
            parts = [value.strip("\"'")]
        out[key.strip()] = parts[0] if parts else ""
    return out


def parse_glibc(text: str) -> str | None:
    """glibc version from ``ldd --version`` ("ldd (Ubuntu GLIBC 2.39-0ubuntu8.6) 2.39" -> "2.39")
    or ``getconf GNU_LIBC_VERSION`` ("glibc 2.36"); None for musl or anything else."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    if "musl" in first.lower():
        return None
    m = re.match(r"(?:ldd .*?|glibc)\s+(\d+\.\d+)\s*$", first, re.I)
    return m.group(1) if m else None


def parse_word(text: str) -> str | None:
    """The first non-empty line, stripped (``uname -m``, ``hostname``)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0] if lines else None
