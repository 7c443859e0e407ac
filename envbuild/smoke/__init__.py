"""Smoke benchmarks run with an environment's own interpreter, and native log parsers.

The scripts in this package (``gpt.py``, ``collective.py``, ``apex_check.py``) import only
torch and the standard library, so the provisioner copies them to a node (``SMOKE_SCRIPTS``)
and runs them with the environment's python; each prints one ``envbuild.smoke/1`` JSON object.
``run_smoke`` runs a selection through any runner and returns ``{kind: result}``, the layout of
a node's ``smoke.json`` that envbuild.report reads; with ``repeat=N`` each kind with numbers
(``REPEATED``) runs N times and its result holds the median of each number, with every run's
values under ``repeat`` (the report shows median, min and max). ``NATIVE_PARSERS`` turn the
recipes' own benchmark logs into metrics (``envbuild.smoke.native``).

Example::

    >>> from envbuild.smoke import run_smoke, local_runner
    >>> res = run_smoke("/opt/env/bin/python", ["gpt", "collective"], "tiny", local_runner)
    >>> res["gpt"]["tokens_per_s"] > 0
    True
"""

from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path
from typing import Callable, Sequence

from envbuild.plan.smoke import SCRIPT_NAMES, smoke_argv
from envbuild.shipped import SMOKE
from envbuild.smoke.floors import floors_for
from envbuild.smoke.judge import with_floor_verdicts
from envbuild.smoke.native import NATIVE_PARSERS, parse

HERE = SMOKE
SCHEMA = "envbuild.smoke/1"

#: kind -> the script file to copy to nodes (run as ``python <script> --json ...``)
SMOKE_SCRIPTS: dict[str, Path] = {kind: HERE / name for kind, name in SCRIPT_NAMES.items()}
KINDS = tuple(SMOKE_SCRIPTS)
PRESETS = ("tiny", "350m")
#: the numbers of each kind that a repeated run summarises (the first one picks the median run)
REPEATED: dict[str, tuple[str, ...]] = {
    "gpt": ("tokens_per_s", "tflops", "mfu", "peak_tflops"),
    "collective": ("max_busbw_gbps", "max_algbw_gbps"),
}

#: runs argv, returns (returncode, stdout, stderr)
Runner = Callable[[Sequence[str]], "tuple[int, str, str]"]

__all__ = ["SMOKE_SCRIPTS", "NATIVE_PARSERS", "KINDS", "PRESETS", "REPEATED", "smoke_command", "run_smoke",
           "combine_runs", "local_runner", "read_result", "parse"]


def smoke_command(python: str, kind: str, preset: str = "tiny", script_dir: str | None = None,
                  *, require: bool = False) -> list[str]:
    """The argv that runs one smoke script (``envbuild.plan.smoke.smoke_argv``); ``script_dir``
    is where the scripts lie on the node, this package's folder when None.

    >>> smoke_command("py", "collective", "tiny", "/e/.envbuild/smoke")
    ['py', '/e/.envbuild/smoke/collective.py', '--json', '--device', 'cpu', '--nproc', '2']
    """
    return smoke_argv(python, kind, preset, str(HERE) if script_dir is None else script_dir, require=require)


def read_result(kind: str, rc: int, out: str, err: str) -> dict:
    """The script's JSON object, or a failure record naming what went wrong."""
    for line in reversed(out.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if obj.get("schema") == SCHEMA:
                obj.setdefault("ok", rc == 0)
                obj["rc"] = rc
                floors = floors_for(obj)  # judged by envbuild.smoke.judge (floor_verdicts)
                if floors and "thresholds" not in obj:
                    obj["thresholds"] = floors
                return obj
    tail = (err or out).strip().splitlines()[-1:] or [""]
    return {"schema": SCHEMA, "kind": kind, "ok": False, "rc": rc,
            "error": f"no result from the {kind} smoke script (exit {rc}): {tail[0][:300]}"}


def _number(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def combine_runs(kind: str, runs: list[dict]) -> dict:
    """One result from repeated runs of ``kind``: the run nearest the median of the kind's first
    number (its other fields: loss, config...), each number of ``REPEATED[kind]`` replaced by the
    median over the runs that gave it, and ``repeat: {n, values: {number: [...]}, ok: [...]}``.
    ``ok`` only when every run was; the first error is kept.

    >>> r = combine_runs("collective", [{"ok": True, "max_busbw_gbps": b} for b in (3.0, 1.0, 2.0)])
    >>> r["max_busbw_gbps"], r["repeat"]["values"]["max_busbw_gbps"], r["ok"]
    (2.0, [3.0, 1.0, 2.0], True)
    """
    if len(runs) == 1:
        return runs[0]
    keys = REPEATED.get(kind, ())
    values = {k: [x for x in (_number(r.get(k)) for r in runs) if x is not None] for k in keys}
    values = {k: v for k, v in values.items() if v}
    first = next((k for k in keys if k in values), None)
    if first is None:
        base = dict(runs[0])
    else:
        med = statistics.median(values[first])
        base = dict(min((r for r in runs if _number(r.get(first)) is not None),
                        key=lambda r: abs(_number(r.get(first)) - med)))
    for k, v in values.items():
        base[k] = statistics.median(v)
    base["ok"] = all(bool(r.get("ok")) for r in runs)
    error = next((r["error"] for r in runs if r.get("error")), None)
    if error:
        base["error"] = error
    base["repeat"] = {"n": len(runs), "values": values, "ok": [bool(r.get("ok")) for r in runs]}
    return base


def run_smoke(python: str, kinds: Sequence[str], preset: str, runner: Runner,
              script_dir: str | None = None, repeat: int = 1) -> dict:
    """Run each smoke ``kind`` with ``python`` through ``runner``; return ``{kind: result}``.

    ``repeat``: run each kind of ``REPEATED`` that many times and combine (``combine_runs``).
    """
    results = {}
    for kind in kinds:
        if kind not in SMOKE_SCRIPTS:
            from envbuild.errors import InputError
            raise InputError(f"unknown smoke kind {kind!r}", hint="choose from: " + ", ".join(KINDS))
        runs = []
        for _ in range(max(1, repeat) if kind in REPEATED else 1):
            rc, out, err = runner(smoke_command(python, kind, preset, script_dir))
            runs.append(read_result(kind, rc, out, err))
        results[kind] = with_floor_verdicts(combine_runs(kind, runs))  # floors judged on the median
    return results


def local_runner(argv: Sequence[str], timeout: float = 1800) -> tuple[int, str, str]:
    """Run ``argv`` on this machine; a timeout or a missing program becomes rc 124 / 127."""
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout:.0f} s"
    except OSError as exc:
        return 127, "", str(exc)
