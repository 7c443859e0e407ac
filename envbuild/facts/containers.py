"""Container engines on PATH and their versions (``<tool> --version``; no daemon needed)."""

from __future__ import annotations

import re

from envbuild.facts.probe import Probe

ENGINES = ("docker", "podman", "apptainer", "singularity", "enroot")

PROBES = [
    Probe(
        "containers",
        "found=\n"
        f"for t in {' '.join(ENGINES)}; do\n"
        '  command -v "$t" >/dev/null 2>&1 || continue\n'
        '  found=1; echo "@@ $t"; __eb_to "$t" --version 2>&1 | head -n 3\n'
        "done\n"
        '[ -n "$found" ] || exit 127',
    ),
]


def parse_engine_version(text: str) -> str | None:
    """"Docker version 28.2.2, build e6534b4" -> "28.2.2"; "podman version 4.3.1" -> "4.3.1";
    "apptainer version 1.3.4" / "singularity-ce version 4.1.0" / enroot's bare "3.5.0"."""
    m = re.search(r"(?:version\s+)?v?(\d+\.\d+(?:\.\d+)?(?:[-+~][0-9A-Za-z.+~-]+)?)", text)
    return m.group(1).rstrip(",") if m else None


def parse_containers(text: str) -> dict[str, str]:
    """Blocks "@@ tool" + version output -> {tool: version or "unknown"}."""
    out: dict[str, str] = {}
    tool: str | None = None
    buf: list[str] = []
    for line in text.splitlines() + ["@@ "]:
        if line.startswith("@@ "):
            if tool:
                out[tool] = parse_engine_version("\n".join(buf)) or "unknown"
            tool, buf = line[3:].strip(), []
        else:
            buf.append(line)
    return out
