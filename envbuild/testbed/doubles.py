"""Doubles for absent hardware only: ``nvidia-smi`` and ``nvcc`` scripts that replay output
captured on a real node (tests/fixtures/nodes/<node>/), chosen by their arguments.

    bin_dir = install_gpu_doubles(tmp_path / "bin", FIXTURES / "h100-ubuntu2404-cuda13")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
"""

from __future__ import annotations

import shlex
from pathlib import Path

# argv pattern (sh case) -> fixture file; the first existing file wins
NVIDIA_SMI_CASES = [
    ("*--query-gpu=*", "nvidia-smi-query.csv"),
    ("-q\\ -x|-x\\ -q", "nvidia-smi-q.xml"),
    ("topo\\ -m", "nvidia-smi-topo.txt"),
    ("", "nvidia-smi.txt"),
]


def _script(cases: list[tuple[str, str]], fixture_dir: Path) -> str:
    lines = ["#!/bin/sh", 'case "$*" in']
    for pattern, name in cases:
        path = fixture_dir / name
        if path.is_file():
            lines.append(f"  {pattern or '*'}) exec cat {shlex.quote(str(path))} ;;")
        elif pattern:
            lines.append(f"  {pattern}) echo 'no captured output for: nvidia-smi '\"$*\" >&2; exit 2 ;;")
    lines += ["  *) echo \"no captured output for: $0 $*\" >&2; exit 2 ;;", "esac", ""]
    return "\n".join(lines)


def install_gpu_doubles(bin_dir: str | Path, fixture_dir: str | Path) -> Path:
    """Write ``nvidia-smi`` (and ``nvcc`` when nvcc-version.txt exists) into ``bin_dir``."""
    bin_dir, fixture_dir = Path(bin_dir), Path(fixture_dir).resolve()
    bin_dir.mkdir(parents=True, exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text(_script(NVIDIA_SMI_CASES, fixture_dir))
    smi.chmod(0o755)
    if (fixture_dir / "nvcc-version.txt").is_file():
        nvcc = bin_dir / "nvcc"
        nvcc.write_text(_script([("--version|-V", "nvcc-version.txt")], fixture_dir))
        nvcc.chmod(0o755)
    return bin_dir
