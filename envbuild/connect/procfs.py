"""The controller's processes as Linux's /proc lists them (for stopping what a run started)."""

from __future__ import annotations

import os
from pathlib import Path


def stats() -> dict[int, list[str]]:
    """{pid: the fields of /proc/<pid>/stat after the command name} (state, ppid, pgrp,
    session, ...; starttime at index 19); empty where there is no /proc."""
    out: dict[int, list[str]] = {}
    if not os.path.isdir("/proc"):
        return out
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            out[int(name)] = Path("/proc", name, "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
    return out
