"""The CUDA-version-aware Apex decision, and patching an Apex source tree accordingly.

Apex's setup.py refuses to build ``--cuda_ext`` unless nvcc's CUDA equals the CUDA torch was
built with: major and minor since 2019-05 (50689f6a, NVIDIA/apex#323), as exact ``packaging``
Version objects since 2022-10 (5f1a73ec, #1502); it never became major-only and has no opt-out
(PINS.md, "NVIDIA Apex facts"). torch's own ``BuildExtension`` only warns on a minor mismatch,
and a same-major toolkit builds working extensions, so envbuild relaxes the check to the major
when only the minor differs, and refuses before building when the major differs.

Example::

    >>> decide("11.4", "11.3").outcome
    'patched'
    >>> decide("10.2", "11.1").outcome
    'refused'
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from envbuild.errors import InputError
from envbuild.fsio import sha256_text, write_atomic
from envbuild.node.textpatch import CHECK_FN, neutralize_apex_cuda_check, unified_diff

Outcome = Literal["unchanged", "patched", "refused", "cpu-only"]

WHY_EXACT = (
    "Apex's setup.py demands an exact match (major and minor since 2019-05, 50689f6a / "
    "NVIDIA/apex#323; exact packaging Version objects since 2022-10, 5f1a73ec) although torch's "
    "BuildExtension only warns on a minor mismatch"
)


@dataclass(frozen=True)
class ApexDecision:
    """What to do with Apex's CUDA check for one (nvcc, torch CUDA) pair."""

    outcome: Outcome
    reason: str
    fix: str | None = None


@dataclass(frozen=True)
class PatchReport:
    """Result of :func:`patch_tree`: the decision, the diff, and whether it was written."""

    decision: Outcome
    reason: str
    diff: str
    applied: bool
    fix: str | None = None
    path: str = ""
    status: str = ""  # textpatch status: applied, already-applied, not-needed, unrecognized

    @property
    def digest(self) -> str:
        """sha256 of the diff ('' when the tree is left as is); feeds :func:`cache_key`."""
        return sha256_text(self.diff) if self.diff else ""

    def to_dict(self) -> dict:
        return {**asdict(self), "digest": self.digest}


def parse_cuda(text: str | None, what: str) -> tuple[int, int] | None:
    """``"11.3"``, ``"11.3.109"``, ``"cu113"`` -> ``(11, 3)``; None stays None; else InputError."""
    if text is None or str(text).strip().lower() in ("", "none", "cpu"):
        return None
    s = str(text).strip().lower()
    m = re.fullmatch(r"cu(\d{2,3})", s)
    if m:
        digits = m.group(1)
        return int(digits[:-1]), int(digits[-1])
    m = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)*", s)
    if not m:
        raise InputError(f"{what}: {text!r} is not a CUDA version",
                         hint=f"give {what} as MAJOR.MINOR, e.g. 11.3 (or cu113)")
    return int(m.group(1)), int(m.group(2))


def _v(t: tuple[int, int]) -> str:
    return f"{t[0]}.{t[1]}"


def decide(nvcc: str | None, torch_cuda: str | None, *, cuda_ext: bool = True) -> ApexDecision:
    """Decide how to treat Apex's CUDA check.

    ``nvcc``: the node's toolkit (``nvcc -V`` release), None when there is none;
    ``torch_cuda``: ``torch.version.cuda`` of the wheel (None for a CPU build);
    ``cuda_ext``: whether CUDA extensions (``--cuda_ext``) are requested.
    """
    n, t = parse_cuda(nvcc, "--nvcc"), parse_cuda(torch_cuda, "--torch-cuda")
    if not cuda_ext:
        return ApexDecision("cpu-only", "only --cpp_ext requested: Apex runs its CUDA check for "
                            "--cuda_ext alone, so setup.py is left as is")
    if t is None:
        return ApexDecision(
            "refused", "CUDA extensions requested but torch is a CPU build (torch.version.cuda is None)",
            fix=("install a CUDA build of torch (+cu<XY> matching the node's CUDA major"
                 + (f" {n[0]}" if n else "") + "), or build Apex with --cpp_ext only"))
    if n is None:
        return ApexDecision(
            "refused", f"CUDA extensions requested but no nvcc was found (torch wants CUDA {_v(t)})",
            fix=(f"install the CUDA toolkit {_v(t)} (nvcc) and set CUDA_HOME to it, or build Apex "
                 "with --cpp_ext only"))
    if n == t:
        return ApexDecision("unchanged", f"nvcc {_v(n)} equals torch's CUDA {_v(t)}: Apex's check "
                            "passes as published")
    if n[0] == t[0]:
        return ApexDecision(
            "patched",
            f"nvcc {_v(n)} and torch's CUDA {_v(t)} differ only in the minor version; {WHY_EXACT}. "
            "Relaxing the check to the major (a major mismatch still raises)")
    return ApexDecision(
        "refused",
        f"nvcc {_v(n)} and torch's CUDA {_v(t)} differ in the major version: extensions built so "
        "would not load against this torch; refused before building",
        fix=(f"install the torch wheel built for CUDA {n[0]}.x (a +cu{n[0]}<minor> wheel, matching the "
             f"node's nvcc {_v(n)}) or a CUDA toolkit {_v(t)} matching torch, with CUDA_HOME set to it"))


def _read_tree(src_dir: str | Path) -> tuple[Path, str]:
    src = Path(src_dir)
    setup = src / "setup.py"
    if not src.is_dir():
        raise InputError(f"{src}: not a directory", hint="give the path of an Apex checkout")
    if not setup.is_file():
        raise InputError(f"{setup}: no setup.py", hint="give the root of an Apex checkout (it holds setup.py)")
    text = setup.read_text(encoding="utf-8")
    if CHECK_FN not in text and not (src / "apex").is_dir():
        raise InputError(f"{src}: not an Apex tree (setup.py has no {CHECK_FN} and there is no apex/)",
                         hint="point at the NVIDIA/apex checkout, not another project")
    return setup, text


def patch_tree(src_dir: str | Path, nvcc: str | None, torch_cuda: str | None, apply: bool = False,
               *, cuda_ext: bool = True) -> PatchReport:
    """Decide for ``src_dir`` (an Apex checkout) and, with ``apply``, write setup.py atomically.

    Idempotent: a second call on a patched tree reports ``patched`` with ``status
    already-applied`` and changes nothing. Raises InputError when the tree has no setup.py or is
    not Apex.
    """
    setup, text = _read_tree(src_dir)
    d = decide(nvcc, torch_cuda, cuda_ext=cuda_ext)
    if d.outcome != "patched":
        return PatchReport(d.outcome, d.reason, "", False, d.fix, str(setup))
    status, new_text, detail = neutralize_apex_cuda_check(text)
    if status == "applied":
        diff = unified_diff(text, new_text, "setup.py")
        if apply:
            write_atomic(setup, new_text, mode=setup.stat().st_mode & 0o777)
        return PatchReport("patched", f"{d.reason}: {detail}", diff, apply, None, str(setup), status)
    if status == "already-applied":
        return PatchReport("patched", f"{d.reason}: already patched ({detail})", "", False, None,
                           str(setup), status)
    if status == "not-needed":
        return PatchReport("unchanged", f"nvcc {nvcc} vs torch CUDA {torch_cuda}: {detail}", "", False,
                           None, str(setup), status)
    if CHECK_FN not in text:  # an Apex tree from before the check existed
        return PatchReport("unchanged", f"this Apex setup.py has no {CHECK_FN} (it predates the check "
                           "of 2019-03-21, 5b8faa29): nothing to relax", "", False, None, str(setup), status)
    return PatchReport(
        "refused", f"cannot relax Apex's CUDA check: {detail}", "", False,
        fix=(f"use an nvcc whose CUDA equals torch's ({torch_cuda}), or add a 'replace'/'regex' patch "
             "for this Apex commit to the recipe"),
        path=str(setup), status=status)
