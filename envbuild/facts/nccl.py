"""NCCL version: torch's own (only for a CUDA build of torch), the nccl.h header, or the
versioned file name of libnccl.so found through ``ldconfig -p`` and the usual library folders.

Output lines of the probe are tagged: "torchlib <code> <path>" (the libnccl torch's CUDA library
loads, asked through ncclGetVersion), "torch <value>" (torch imported), "header #define ...",
"lib <path>".
"""

from __future__ import annotations

import re

from envbuild.facts.probe import Probe

# torch's NCCL, cheaply where it can be: importing a CUDA build of torch takes seconds (3.8 s of a
# 4.3 s facts run on an H200 node, bench/results/facts-probe-times-h200.json), and facts run at
# every provision, the no-op's too. A torch that links NCCL dynamically (PyPI's builds since 1.13,
# with the nvidia-nccl wheel) calls ncclGetVersion() of the libnccl the loader resolves for its
# lib/libtorch_cuda.so; ldd names that library as the loader resolves it (RPATH, LD_LIBRARY_PATH)
# and ctypes asks it the same question ("torchlib CODE PATH"). A build with NCCL linked in (no
# libnccl in ldd's list) or a library that does not answer: torch is imported ("torch VALUE").
# ldd lists the libraries loaded indirectly too: a torch with NCCL linked in whose other
# dependencies load a libnccl would be answered by that one (no PyPI or conda build does).
_TORCH_CUDA_LIB = (
    "import importlib.util as u, os; s = u.find_spec('torch'); "
    "p = s and s.submodule_search_locations and os.path.join(list(s.submodule_search_locations)[0], 'lib', "
    "'libtorch_cuda.so'); print(p if p and os.path.exists(p) else '')"
)
_NCCL_GET_VERSION = (
    "import ctypes, sys; c = ctypes.c_int(); r = ctypes.CDLL(sys.argv[1]).ncclGetVersion(ctypes.byref(c)); "
    "sys.exit(1) if r else print(c.value)"
)

PROBES = [
    Probe(
        "nccl",
        "found=; tc=\n"
        f'[ -z "$__eb_py" ] || tc=$(__eb_to "$__eb_py" -c "{_TORCH_CUDA_LIB}" 2>/dev/null)\n'
        'if [ -n "$tc" ]; then\n'
        "  nl=$(__eb_to ldd \"$tc\" 2>/dev/null | sed -n 's/^[[:space:]]*libnccl[.]so[^ ]* => \\(\\/.*\\) (0x[0-9a-f]*)$/\\1/p'"
        " | head -n 1)\n"
        f'  if [ -n "$nl" ] && v=$(__eb_to "$__eb_py" -c "{_NCCL_GET_VERSION}" "$nl" 2>/dev/null) && [ -n "$v" ]; then\n'
        '    echo "torchlib $v $(readlink -f "$nl")"; found=1\n'
        "  else\n"
        '    v=$(__eb_to "$__eb_py" -c "import torch; print(torch.cuda.nccl.version())" 2>/dev/null)'
        ' && { echo "torch $v"; found=1; }\n'
        "  fi\n"
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
    """Best NCCL version in the probe output: torch's (imported, else its loaded library's), else the
    header's, else the newest library."""
    # "torch VALUE" (VALUE may hold blanks: "(2, 28, 9)"), else "torchlib CODE PATH"
    for pattern in (r"^torch (.+)$", r"^torchlib (\S+) "):
        m = re.search(pattern, text, re.M)
        if m and (version := parse_torch_nccl(m.group(1))):
            return version
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
