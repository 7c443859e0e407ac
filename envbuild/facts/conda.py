"""Conda-like tools on PATH (conda, mamba, micromamba) and environment modules (``module avail``)."""

from __future__ import annotations

import re

from envbuild.facts.probe import Probe

CONDA_TOOLS = ("conda", "mamba", "micromamba")

PROBES = [
    Probe(
        "conda",
        "found=\n"
        f"for t in {' '.join(CONDA_TOOLS)}; do\n"
        '  p=$(command -v "$t" 2>/dev/null) || continue\n'
        '  found=1; echo "$t $p"\n'
        "done\n"
        '[ -n "$found" ] || exit 127',
    ),
    Probe(
        "modules",
        # `module` is a shell function set up by login scripts; source the usual init files
        "for f in /etc/profile.d/lmod.sh /etc/profile.d/modules.sh /usr/share/lmod/lmod/init/sh"
        " /usr/share/modules/init/sh; do\n"
        '  if [ -r "$f" ]; then . "$f" >/dev/null 2>&1; break; fi\n'
        "done\n"
        "type module >/dev/null 2>&1 || exit 127\n"
        "module -t avail 2>&1",
    ),
]


def parse_conda(text: str) -> list[str]:
    """Lines "tool path" -> the executables' paths, in the order printed."""
    out = []
    for line in text.splitlines():
        tool, _, path = line.strip().partition(" ")
        if tool in CONDA_TOOLS and path.strip():
            out.append(path.strip())
    return out


def parse_module_avail(text: str) -> list[str]:
    """``module -t avail`` (Lmod or Tcl Environment Modules) -> sorted module names.

    Folder headers ("/opt/modulefiles:"), blank lines and markers such as "(default)" or
    "<L>" are dropped.
    """
    names = set()
    for line in text.splitlines():
        line = line.strip()
        if not line or line.endswith(":") or line.startswith(("-", "Use ", "If ", "Where")):
            continue
        name = re.sub(r"\s*(\([^)]*\)|<[^>]*>)\s*", "", line).strip()
        if name and " " not in name:
            names.add(name)
    return sorted(names)
