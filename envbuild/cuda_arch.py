"""GPU architectures vs CUDA: toolkit minimum per compute capability, driver -> highest CUDA,
and cubin compatibility. Each row says why and where from; inferences are marked.
"""

from __future__ import annotations

from dataclasses import dataclass

from envbuild.versions import major_minor, vtuple

NVIDIA_RELEASE_NOTES = "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html"
ZENN_TABLE = "https://zenn.dev/eduidl/articles/cuda-comparability"
CUBIN_RULE = "https://reviews.llvm.org/D138600"


@dataclass(frozen=True)
class ArchRow:
    """Compute capability ``cc`` first targetable by CUDA toolkit ``min_cuda``."""

    cc: str
    name: str
    min_cuda: str
    why: str
    source: str


ARCH_MIN_CUDA: list[ArchRow] = [
    ArchRow("3.7", "Kepler K80", "5.0", "inference: general knowledge, not re-read here", NVIDIA_RELEASE_NOTES),
    ArchRow("6.0", "Pascal P100", "8.0", "inference: general knowledge, not re-read here", NVIDIA_RELEASE_NOTES),
    ArchRow("7.0", "Volta V100", "9.0", "Volta support arrived with CUDA 9.0", ZENN_TABLE),
    ArchRow("7.5", "Turing T4", "10.0", "Turing support arrived with CUDA 10.0", ZENN_TABLE),
    ArchRow("8.0", "Ampere A100", "11.0", "Ampere 8.x needs CUDA 11.0 (PINS: GPU section)", ZENN_TABLE),
    ArchRow("8.6", "Ampere GA10x", "11.1", "Apex e1aa1fc1: '8.6 requires CUDA 11.1'",
            "https://github.com/NVIDIA/apex/commit/e1aa1fc1"),
    ArchRow("8.9", "Ada RTX 4090", "11.8",
            "inference: Ada arrived with CUDA 11.8 (no quoted table found, PINS GPU section)", ZENN_TABLE),
    ArchRow("9.0", "Hopper H100", "11.8",
            "Hopper 9.x needs CUDA 11.8; Apex adds sm_90 only for nvcc >= 11.8 (5f1a73ec)", ZENN_TABLE),
    ArchRow("10.0", "Blackwell B200", "12.8", "inference: general knowledge, not re-read here", NVIDIA_RELEASE_NOTES),
    ArchRow("12.0", "Blackwell RTX 50", "12.8", "inference: general knowledge, not re-read here", NVIDIA_RELEASE_NOTES),
]


@dataclass(frozen=True)
class DriverRow:
    """CUDA ``cuda`` needs Linux driver >= ``min_driver`` (full support, no compat mode)."""

    cuda: str
    min_driver: str
    source: str = NVIDIA_RELEASE_NOTES
    why: str = "CUDA toolkit release notes, table 'CUDA Toolkit and Minimum Required Driver' (recalled)"


DRIVER_MIN: list[DriverRow] = [
    DriverRow("10.2", "440.33"),
    DriverRow("11.0", "450.36.06"),
    DriverRow("11.1", "455.23"),
    DriverRow("11.2", "460.27.03"),
    DriverRow("11.3", "465.19.01"),
    DriverRow("11.4", "470.42.01"),
    DriverRow("11.5", "495.29.05"),
    DriverRow("11.6", "510.39.01"),
    DriverRow("11.7", "515.43.04"),
    DriverRow("11.8", "520.61.05"),
    DriverRow("12.0", "525.60.13"),
    DriverRow("12.1", "530.30.02"),
    DriverRow("12.2", "535.54.03"),
    DriverRow("12.3", "545.23.06"),
    DriverRow("12.4", "550.54.14"),
    DriverRow("12.5", "555.42.02"),
    DriverRow("12.6", "560.28.03"),
    DriverRow("12.8", "570.26"),
    DriverRow("12.9", "575.51.03"),
    DriverRow("13.0", "580.65.06", why="also captured: driver 580.159.04 reports CUDA 13.0 "
              "(shared/fixtures/nodes/h100-ubuntu2404-cuda13/nvidia-smi.txt)"),
]

# Minor-version compatibility: an application built with any 11.x (12.x, 13.x) runtime runs on a
# driver of at least this version, without PTX JIT of newer PTX (recalled from the same notes).
MINOR_COMPAT_MIN_DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}


def arch_row(cc: str) -> ArchRow | None:
    return next((r for r in ARCH_MIN_CUDA if r.cc == cc), None)


def min_cuda_for_arch(cc: str) -> str | None:
    """Lowest CUDA toolkit that can compile for compute capability ``cc`` ("9.0" -> "11.8")."""
    row = arch_row(cc)
    return row.min_cuda if row else None


def cuda_supports_arch(cuda: str, cc: str) -> bool | None:
    """Whether CUDA ``cuda`` can target ``cc``; None when ``cc`` is not in the table."""
    need = min_cuda_for_arch(cc)
    if need is None:
        return None
    return vtuple(cuda) >= vtuple(need)


def max_cuda_for_driver(driver: str | None) -> str | None:
    """Highest CUDA a driver fully supports ("470.82.01" -> "11.4", "580.159.04" -> "13.0")."""
    if not driver:
        return None
    best = None
    for row in DRIVER_MIN:
        if vtuple(driver) >= vtuple(row.min_driver):
            best = row.cuda
    return best


def driver_cuda(facts_driver_cuda: str | None, driver: str | None) -> str | None:
    """The node's highest CUDA: nvidia-smi's 'CUDA Version' wins, else derived from the driver."""
    return major_minor(facts_driver_cuda) or max_cuda_for_driver(driver)


def min_driver_for(cuda: str | None) -> str | None:
    """Lowest driver that fully supports CUDA ``cuda`` ("11.4" -> "470.42.01")."""
    row = next((r for r in DRIVER_MIN if vtuple(r.cuda) == vtuple(cuda)[:2]), None) if cuda else None
    return row.min_driver if row else None


def minor_compat(driver: str | None, cuda: str) -> bool:
    """Whether ``driver`` runs CUDA ``cuda`` through minor-version compatibility."""
    need = MINOR_COMPAT_MIN_DRIVER.get(vtuple(cuda)[0]) if vtuple(cuda) else None
    return bool(driver and need and vtuple(driver) >= vtuple(need))


def sm(cc: str) -> str:
    """``"9.0"`` -> ``"sm_90"``."""
    return "sm_" + cc.replace(".", "")


def cubin_runs(built: str, gpu: str) -> bool:
    """A cubin for ``built`` (X.y) runs on ``gpu`` (X.z) only when z >= y (same major)."""
    b, g = vtuple(built), vtuple(gpu)
    return bool(b and g) and b[0] == g[0] and g[1:] >= b[1:]


def binary_runs(archs: list[str], ptx: list[str], gpu: str) -> bool:
    """Whether code built for ``archs`` (SASS) and ``ptx`` (PTX) runs on ``gpu``.

    SASS needs :func:`cubin_runs`; PTX for X.y JIT-compiles on any GPU >= X.y.
    """
    if any(cubin_runs(a, gpu) for a in archs):
        return True
    return any(vtuple(p) <= vtuple(gpu) for p in ptx)
