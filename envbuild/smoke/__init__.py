"""Smoke benchmarks run with an environment's own interpreter, and native log parsers.

The scripts in this package (``gpt.py``, ``collective.py``, ``apex_check.py``) import only
torch and the standard library, so the provisioner copies them to a node (``SMOKE_SCRIPTS``)
and runs them with the environment's python; each prints one ``envbuild.smoke/1`` JSON object.
``run_smoke`` runs a selection through any runner and returns ``{kind: result}``, the layout of
a node's ``smoke.json`` that envbuild.report reads. ``NATIVE_PARSERS`` turn the recipes' own
benchmark logs into metrics (``envbuild.smoke.native``).

Example::

    >>> from envbuild.smoke import run_smoke, local_runner
    >>> res = run_smoke("/opt/env/bin/python", ["gpt", "collective"], "tiny", local_runner)
    >>> res["gpt"]["tokens_per_s"] > 0
    True
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Callable, Sequence

from envbuild.smoke.native import NATIVE_PARSERS, Verdict, evaluate, parse

HERE = Path(__file__).parent
SCHEMA = "envbuild.smoke/1"

#: kind -> the script file to copy to nodes (run as ``python <script> --json ...``)
SMOKE_SCRIPTS: dict[str, Path] = {
    "gpt": HERE / "gpt.py",
    "collective": HERE / "collective.py",
    "apex": HERE / "apex_check.py",
}
KINDS = tuple(SMOKE_SCRIPTS)
PRESETS = ("tiny", "350m")

#: runs argv, returns (returncode, stdout, stderr)
Runner = Callable[[Sequence[str]], "tuple[int, str, str]"]

__all__ = ["SMOKE_SCRIPTS", "NATIVE_PARSERS", "KINDS", "PRESETS", "smoke_command", "run_smoke",
           "local_runner", "read_result", "evaluate", "parse", "Verdict"]


def smoke_command(python: str, kind: str, preset: str = "tiny", script_dir: str | None = None,
                  *, require: bool = False) -> list[str]:
    """The argv that runs one smoke script; ``script_dir`` is where the scripts lie on the node.

    Each script has its own flags: only gpt takes ``--preset``; collective runs two CPU ranks
    for the tiny preset; apex with ``require`` (the recipe builds Apex) fails when Apex is absent.

    >>> smoke_command("py", "collective", "tiny", "/e/.envbuild/smoke")
    ['py', '/e/.envbuild/smoke/collective.py', '--json', '--device', 'cpu', '--nproc', '2']
    """
    script = SMOKE_SCRIPTS[kind] if script_dir is None else Path(script_dir) / SMOKE_SCRIPTS[kind].name
    argv = [python, str(script), "--json"]
    if kind == "gpt":
        argv += ["--preset", preset]
    elif kind == "collective" and preset == "tiny":
        argv += ["--device", "cpu", "--nproc", "2"]
    elif kind == "apex" and require:
        argv += ["--require"]
    return argv


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
                return obj
    tail = (err or out).strip().splitlines()[-1:] or [""]
    return {"schema": SCHEMA, "kind": kind, "ok": False, "rc": rc,
            "error": f"no result from the {kind} smoke script (exit {rc}): {tail[0][:300]}"}


def run_smoke(python: str, kinds: Sequence[str], preset: str, runner: Runner,
              script_dir: str | None = None) -> dict:
    """Run each smoke ``kind`` with ``python`` through ``runner``; return ``{kind: result}``."""
    results = {}
    for kind in kinds:
        if kind not in SMOKE_SCRIPTS:
            from envbuild.errors import InputError
            raise InputError(f"unknown smoke kind {kind!r}", hint="choose from: " + ", ".join(KINDS))
        rc, out, err = runner(smoke_command(python, kind, preset, script_dir))
        results[kind] = read_result(kind, rc, out, err)
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
