"""Host hardware facts: cores (``nproc``), memory (/proc/meminfo), CPU model."""

from __future__ import annotations

import re

from envbuild.facts.probe import Probe

PROBES = [
    Probe("nproc", "nproc 2>/dev/null || getconf _NPROCESSORS_ONLN"),
    Probe("meminfo", "head -n 5 /proc/meminfo"),
    Probe(
        "cpu_model",
        "grep -m 1 -E '^(model name|Model name|cpu model|Hardware)[[:space:]]*:' /proc/cpuinfo"
        " || { command -v lscpu >/dev/null 2>&1 && lscpu | grep -m 1 -E '^Model name:'; }",
    ),
]


def parse_nproc(text: str) -> int | None:
    """``nproc`` -> 16."""
    m = re.match(r"\s*(\d+)\s*$", text)
    return int(m.group(1)) if m else None


def parse_meminfo_gib(text: str) -> float | None:
    """MemTotal of /proc/meminfo in GiB, one decimal ("MemTotal: 131927808 kB" -> 125.8)."""
    m = re.search(r"^MemTotal:\s+(\d+)\s*kB", text, re.M)
    return round(int(m.group(1)) / 1024**2, 1) if m else None


def parse_cpu_model(text: str) -> str | None:
    """The value of the first "model name : ..." (cpuinfo) or "Model name: ..." (lscpu) line."""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in ("model name", "cpu model", "hardware") and value.strip():
            return " ".join(value.split())
    return None
