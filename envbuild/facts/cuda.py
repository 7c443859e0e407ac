"""CUDA toolkit facts: which ``nvcc``, its release, and CUDA_HOME.

CUDA_HOME follows torch.utils.cpp_extension's rule, since that is what extension builds use:
``$CUDA_HOME`` (or ``$CUDA_PATH``), else the folder above nvcc's ``bin/``, else /usr/local/cuda
when it exists.

>>> parse_nvcc_version("Cuda compilation tools, release 13.0, V13.0.88")
'13.0'
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from envbuild.facts.probe import Probe

PROBES = [
    Probe(
        "nvcc",
        'echo "CUDA_HOME=${CUDA_HOME:-${CUDA_PATH:-}}"\n'
        '[ -d /usr/local/cuda ] && echo "DEFAULT_HOME=/usr/local/cuda"\n'
        "n=$(command -v nvcc 2>/dev/null)\n"
        'if [ -z "$n" ]; then for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do\n'
        '  if [ -n "$d" ] && [ -x "$d/bin/nvcc" ]; then n="$d/bin/nvcc"; break; fi; done; fi\n'
        '[ -n "$n" ] || exit 127\n'
        'echo "NVCC=$n"\n'
        '"$n" --version',
    ),
]


def parse_nvcc_version(text: str) -> str | None:
    """The toolkit release ("13.0") from ``nvcc --version``; None if absent."""
    m = re.search(r"release (\d+\.\d+)", text)
    return m.group(1) if m else None


@dataclass(frozen=True)
class NvccProbe:
    path: str | None
    version: str | None
    cuda_home: str | None


def parse_nvcc_probe(text: str) -> NvccProbe:
    """Parse the ``nvcc`` probe: ``CUDA_HOME=``/``NVCC=`` lines followed by ``nvcc --version``."""
    env = dict(re.findall(r"^(CUDA_HOME|DEFAULT_HOME|NVCC)=(.*)$", text, re.M))
    path = env.get("NVCC") or None
    home = env.get("CUDA_HOME") or None
    if not home and path and posixpath.basename(posixpath.dirname(path)) == "bin":
        home = posixpath.dirname(posixpath.dirname(path))
    home = home or env.get("DEFAULT_HOME") or None
    return NvccProbe(path=path, version=parse_nvcc_version(text), cuda_home=home)
