"""bench/gpu_carry.py as a module, loaded once (bench/ is not a package): the GPU results pages'
repeat commands and bench/gpu_prepare.sh are tested against its ``plan_jobs`` and carry split."""

from __future__ import annotations

import importlib.util
import sys

from support.paths import ROOT


def gpu_carry():
    """bench/gpu_carry.py as a module (bench/ is not a package)."""
    if "gpu_carry" not in sys.modules:
        spec = importlib.util.spec_from_file_location("gpu_carry", ROOT / "bench" / "gpu_carry.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["gpu_carry"] = mod
        spec.loader.exec_module(mod)
    return sys.modules["gpu_carry"]
