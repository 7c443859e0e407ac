"""Apex build parameters as pure functions of node facts and the Apex commit.

* :func:`arch_list` -> ``TORCH_CUDA_ARCH_LIST`` from the node's compute capabilities, so the
  build does not depend on a visible GPU (Apex cross-compiles for a default list otherwise).
* :func:`build_jobs` -> ``MAX_JOBS`` and nvcc ``--threads`` that fit the node's memory.
* :func:`install_command` -> the argv/env to build Apex for its era and the installed pip.
* :func:`cache_key` -> a key for a wheel cache: build once, install that wheel on every node.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import date
from typing import Iterable, Iterator

from packaging.version import InvalidVersion, Version

from envbuild.errors import CheckFailed, InputError
from envbuild.fsio import canonical_json, sha256_text
from envbuild.patches.apex_options import (
    ENV_FLAGS_SINCE, PYPROJECT_SINCE, parse_date, split_options, validate_options,
)

# NVIDIA/apex#1882 (measured on a 48-thread EPYC, `free`): peak ~24 GiB for the default build,
# ~58 GiB with --parallel 16, ~91 GiB with NVCC_APPEND_FLAGS="--threads 8". Other projects
# measured ~2.7-5 GiB per concurrent nvcc thread; budget 3 GiB each and keep headroom.
GIB_PER_NVCC_THREAD = 3.0
GIB_PER_CXX_JOB = 1.5
SERIAL_PEAK_GIB = 24.0
NVCC_THREADS_SINCE = (11, 3)  # nvcc --threads appeared in CUDA 11.3


def _cc(item: object) -> str:
    if isinstance(item, tuple) and len(item) == 2:
        return f"{int(item[0])}.{int(item[1])}"
    s = str(item).strip().lower().removeprefix("sm_").removeprefix("compute_")
    m = re.fullmatch(r"(\d+)\.(\d+)", s) or re.fullmatch(r"(\d+)(\d)", s)
    if not m:
        raise InputError(f"{item!r} is not a compute capability", hint="write it as 8.0, 80 or sm_80")
    return f"{int(m.group(1))}.{int(m.group(2))}"


def arch_list(compute_capabilities: Iterable[object], *, ptx: bool = False, nvcc: str | None = None) -> str:
    """``["9.0", "8.0", "sm_80"]`` -> ``"8.0;9.0"`` (``"8.0;9.0+PTX"`` with ``ptx``).

    With ``nvcc`` given, every capability must be targetable by that toolkit (CheckFailed
    otherwise, e.g. 9.0 needs CUDA 11.8).
    """
    ccs = sorted({_cc(c) for c in compute_capabilities}, key=lambda c: tuple(map(int, c.split("."))))
    if not ccs:
        raise InputError("no compute capability given", hint="pass the GPUs' capabilities, e.g. 8.0")
    if nvcc:
        from envbuild.cuda_arch import min_cuda_for_arch
        from envbuild.patches.apex import parse_cuda

        have = parse_cuda(nvcc, "nvcc")
        short = [(c, need) for c in ccs if (need := min_cuda_for_arch(c)) and have
                 and have < tuple(int(x) for x in need.split("."))]
        if short:
            raise CheckFailed(
                "nvcc %s cannot target %s" % (nvcc, ", ".join(f"sm_{c.replace('.', '')} (needs CUDA {n})"
                                                              for c, n in short)),
                hint="install a newer CUDA toolkit, or drop those GPUs from the build")
    if ptx:
        ccs[-1] += "+PTX"
    return ";".join(ccs)


@dataclass(frozen=True)
class BuildJobs:
    """Parallelism for one Apex build: extensions built at once (``--parallel``), ``MAX_JOBS``
    (ninja jobs per extension) and nvcc ``--threads`` (splits work across ``-gencode`` targets)."""

    max_jobs: int
    nvcc_threads: int
    reason: str
    parallel: int = 1  # extensions at once; only Apex >= 2025-02-25 (c9e6f056) has --parallel

    def __iter__(self) -> Iterator:
        return iter((self.max_jobs, self.nvcc_threads, self.reason))

    def env(self) -> dict[str, str]:
        """``MAX_JOBS`` and, when above 1, ``NVCC_APPEND_FLAGS=--threads N``."""
        out = {"MAX_JOBS": str(self.max_jobs)}
        if self.nvcc_threads > 1:
            out["NVCC_APPEND_FLAGS"] = f"--threads {self.nvcc_threads}"
        return out

    @property
    def concurrent(self) -> int:
        return self.parallel * self.max_jobs * self.nvcc_threads


# Most Apex extensions have 2-3 sources: more ninja jobs than this per extension sit idle
# (measured on an H100 node, bench/results/h100-apex-build.json).
JOBS_PER_EXTENSION = 4


def build_jobs(cores: int, mem_gib: float, cuda_ext: bool, *, nvcc: str | None = None,
               archs: int = 1, parallel_ext: bool = False) -> BuildJobs:
    """Choose extension parallelism, MAX_JOBS and nvcc threads from the node's cores and memory.

    Keeps max(4 GiB, 15 %) of memory as headroom and budgets 3 GiB per concurrent nvcc process
    or thread (1.5 GiB per C++ job without ``--cuda_ext``). nvcc ``--threads`` only helps with
    several ``-gencode`` targets (``archs``) and only exists from CUDA 11.3. With
    ``parallel_ext`` (Apex's ``--parallel``) the slots are spread over extensions, since each
    extension has only a few sources; without it one extension builds at a time.
    """
    if int(cores) < 1 or float(mem_gib) <= 0:
        raise InputError(f"bad node size: {cores} cores, {mem_gib} GiB", hint="use the node's facts")
    headroom = max(4.0, 0.15 * mem_gib)
    budget = max(0.0, mem_gib - headroom)
    per_slot = GIB_PER_NVCC_THREAD if cuda_ext else GIB_PER_CXX_JOB
    slots = max(1, min(int(cores), math.floor(budget / per_slot)))
    threads = 1
    if cuda_ext:
        threads = max(1, min(4, int(archs), slots))
        if nvcc:
            from envbuild.patches.apex import parse_cuda

            v = parse_cuda(nvcc, "nvcc")
            if v and v < NVCC_THREADS_SINCE:
                threads = 1
    per_thread = max(1, slots // threads)
    if parallel_ext:
        jobs = min(JOBS_PER_EXTENSION, per_thread)
        parallel = max(1, per_thread // jobs)
    else:
        jobs, parallel = per_thread, 1
    what = "nvcc" if cuda_ext else "C++ compile"
    reason = (f"{parallel} extension(s) x {jobs} job(s) x {threads} nvcc thread(s) = "
              f"{parallel * jobs * threads} concurrent {what} at ~{per_slot:g} GiB each within "
              f"{budget:.0f} of {mem_gib:g} GiB, keeping {headroom:.0f} GiB headroom ({cores} cores, "
              f"{archs} GPU arch(s); NVIDIA/apex#1882)")
    if cuda_ext and budget < SERIAL_PEAK_GIB:
        reason += (f"; below the ~{SERIAL_PEAK_GIB:g} GiB peak measured for a default build: expect "
                   "a slow build or OOM, or build the wheel on a bigger node and reuse it (cache_key)")
    return BuildJobs(jobs, threads, reason, parallel)


@dataclass(frozen=True)
class InstallCommand:
    """How to build/install Apex: ``argv`` run in ``cwd`` with ``env``; unpacks as (argv, env, reason)."""

    argv: list[str]
    env: dict[str, str]
    reason: str
    cwd: str = "."
    wheel_dir: str | None = None
    notes: list[str] = field(default_factory=list)

    def __iter__(self) -> Iterator:
        return iter((self.argv, self.env, self.reason))


def install_command(*, pip_version: str, options: list[str], apex_date: str | date | None = None,
                    has_pyproject: bool | None = None, src: str = ".", python: str = "python",
                    wheel_dir: str | None = None) -> InstallCommand:
    """The Apex build command for its era and the pip in the environment.

    Eras (PINS.md "Flag passing"): env-var flags ``APEX_CPP_EXT=1`` from 2025-07-22
    (bfb500c8); pyproject.toml from 2023-06-12 (2d8302a6) -> always ``--no-build-isolation``
    and ``--config-settings "--build-option=..."`` with pip >= 23.1 (``--global-option`` below);
    before that ``--global-option`` with pip < 23.1, else ``python setup.py bdist_wheel``.
    With ``wheel_dir`` a wheel is built there instead of installing (for the wheel cache).
    Options are checked against the option table (:mod:`envbuild.patches.apex_options`).
    """
    day = parse_date(apex_date)
    if has_pyproject is None:
        if day is None:
            raise InputError("cannot tell the Apex era", hint="give the Apex commit date or has_pyproject")
        has_pyproject = day >= PYPROJECT_SINCE
    try:
        pip = Version(pip_version)
    except InvalidVersion:
        raise InputError(f"pip version {pip_version!r} is not a version", hint="e.g. 23.0.1") from None
    pairs = validate_options(options, day) if day else split_options(options)
    flat = [x for row, val in pairs for x in ([row.flag, val] if val else [row.flag])]
    notes = [f"{row.flag}: {row.note}" for row, _ in pairs if "network" in row.note]
    modern_pip = pip >= Version("23.1")
    pip_cmd = [python, "-m", "pip", "wheel", "--no-deps", "-w", wheel_dir] if wheel_dir else \
        [python, "-m", "pip", "install"]
    if day is not None and day >= ENV_FLAGS_SINCE:
        env = {row.env_var: (val or "1") for row, val in pairs}
        argv = [*pip_cmd, "-v", "--no-cache-dir", "--no-build-isolation", src]
        why = (f"Apex {day} reads APEX_* env vars (since 2025-07-22, bfb500c8); pyproject.toml -> "
               "--no-build-isolation so the build sees the installed torch")
        return InstallCommand(argv, env, why, ".", wheel_dir, notes)
    if has_pyproject:
        if modern_pip:
            passing = [f"--config-settings=--build-option={x}" for x in flat]
            why = f"pip {pip} >= 23.1: options via --config-settings \"--build-option=...\""
        else:
            passing = [f"--global-option={x}" for x in flat]
            why = f"pip {pip} < 23.1: options via --global-option"
        argv = [*pip_cmd, "-v", "--no-cache-dir", "--no-build-isolation", *passing, src]
        why += "; Apex has pyproject.toml (since 2023-06-12, 2d8302a6) -> --no-build-isolation"
        return InstallCommand(argv, {}, why, ".", wheel_dir, notes)
    if not modern_pip and not wheel_dir:
        argv = [*pip_cmd, "-v", "--no-cache-dir", *[f"--global-option={x}" for x in flat], src]
        why = f"Apex before pyproject.toml with pip {pip} < 23.1: --global-option (legacy setup.py install)"
        return InstallCommand(argv, {}, why, ".", None, notes)
    out = wheel_dir or "dist"
    argv = [python, "setup.py", *flat, "bdist_wheel", "-d", out]
    why = ("Apex before pyproject.toml: build the wheel with `python setup.py bdist_wheel` in the "
           "tree (needs the wheel package and the installed torch), then pip install the wheel"
           + (f"; pip {pip} >= 23.1 deprecated --global-option and dropped the setup.py install "
              "fallback" if modern_pip else ""))
    return InstallCommand(argv, {}, why, src, out, notes)


def cache_key(apex_sha: str, patch_digest: str, torch_version: str, torch_cuda: str | None,
              nvcc: str | None, arch_list: str, options: list[str], python: str | None = None) -> str:
    """A stable key for a built Apex wheel: same inputs -> same key, option order irrelevant."""
    if not re.fullmatch(r"[0-9a-f]{7,40}", apex_sha or ""):
        raise InputError(f"apex sha {apex_sha!r} is not a commit", hint="give the full 40-hex SHA")
    opts = sorted(f"{row.flag}={val}" if val else row.flag for row, val in split_options(options))
    archs = ";".join(sorted(a for a in arch_list.replace(" ", ";").split(";") if a))
    payload = {"apex": apex_sha, "patch": patch_digest or "", "torch": torch_version,
               "torch_cuda": torch_cuda or "cpu", "nvcc": nvcc or "none", "arch": archs,
               "options": opts, "python": python or ""}
    return "apex-" + apex_sha[:12] + "-" + sha256_text(canonical_json(payload))[:20]
