"""NCCL version: torch's own (only for a CUDA build of torch), the nccl.h header, or the
versioned file name of libnccl.so found through ``ldconfig -p`` and the usual library folders.

Output lines of the probe are tagged: "torch <value>", "header #define ...", "lib <path>".
"""

from __future__ import annotations

import re

from envbuild.facts.probe import Probe

PROBES = [
    Probe(
        "nccl",
        "found=\n"
        # import torch (seconds) only for a CUDA build of it: lib/libtorch_cuda.so exists
        'if [ -n "$__eb_py" ] && "$__eb_py" -c "import importlib.util as u, os, sys; s = u.find_spec(\'torch\'); '
        "sys.exit(not (s and s.submodule_search_locations and os.path.exists("
        "os.path.join(list(s.submodule_search_locations)[0], 'lib', 'libtorch_cuda.so'))))\" 2>/dev/null; then\n"
        '  v=$(__eb_to "$__eb_py" -c "import torch; print(torch.cuda.nccl.version())" 2>/dev/null)'
        ' && { echo "torch $v"; found=1; }\n'
        "fi\n"
        'for h in "${CUDA_HOME:-/usr/local/cuda}/include/nccl.h" /usr/include/nccl.h /usr/local/include/nccl.h; do\n'
        '  [ -r "$h" ] && grep -E "^#define NCCL_(MAJOR|MINOR|PATCH) " "$h" | sed "s/^/header /" && found=1 && break\n'
        "done\n"
        "for p in $( { ldconfig -p 2>/dev/null | sed -n 's/.*libnccl\\.so[^ ]* .*=> //p';"
        ' ls /usr/lib/*-linux-gnu/libnccl.so* /usr/lib64/libnccl.so* /usr/local/cuda/lib64/libnccl.so*'
        ' "${CUDA_HOME:-/nonexistent}"/lib64/libnccl.so* 2>/dev/null; } | sort -u ); do\n'
        '  echo "lib $(readlink -f "$p")"; found=1\n'
        "done\n"
        '[ -n "$found" ] || exit 127',
    ),
]


def parse_torch_nccl(value: str) -> str | None:
    """``torch.cuda.nccl.version()`` printed: "(2, 28, 9)" (torch >= 1.13) or an int code
    ("2708" = 2.7.8 before NCCL 2.9, "21805" = 2.18.5 after)."""
    nums = re.findall(r"\d+", value)
    if len(nums) >= 3:
        return ".".join(nums[:3])
    if len(nums) == 1:
        code = int(nums[0])
        if code >= 20900:
            return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
        if code >= 1000:
            return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"
    return None


def parse_nccl(text: str) -> str | None:
    """Best NCCL version in the probe output: torch's, else the header's, else the newest library."""
    torch = [parse_torch_nccl(line[6:]) for line in text.splitlines() if line.startswith("torch ")]
    if torch and torch[0]:
        return torch[0]
    defs = dict(re.findall(r"^header #define NCCL_(MAJOR|MINOR|PATCH)\s+(\d+)", text, re.M))
    if {"MAJOR", "MINOR", "PATCH"} <= defs.keys():
        return f"{defs['MAJOR']}.{defs['MINOR']}.{defs['PATCH']}"
    libs = re.findall(r"^lib .*libnccl\.so\.(\d+\.\d+\.\d+)\s*$", text, re.M)
    if libs:
        return max(libs, key=lambda v: tuple(map(int, v.split("."))))
    return None


def nccl_from_pip(pip_packages: dict[str, str]) -> str | None:
    """The NCCL wheel torch depends on (nvidia-nccl-cu12 / -cu13 / -cu11), if installed."""
    for name in sorted(pip_packages):
        if re.fullmatch(r"nvidia-nccl-cu\d+", name):
            return pip_packages[name]
    return None
