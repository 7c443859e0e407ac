"""The smoke flow: envbuild's own smoke scripts run here with an environment's interpreter.

``smoke(SmokeRequest(...)) -> SmokeOutcome``: the interpreter found (``python``: a path or a
name on PATH; None: this one), each kind run through ``envbuild.smoke.run_smoke`` on this
machine (``repeat`` times: each number the median, with min and max), an interpreter without
torch refused (EnvironmentProblem, exit 3), the results written to ``out`` when given. The
caller shows them, then ends with ``failure()`` (CheckFailed, exit 1) when one is not ok.

``KINDS`` and ``PRESETS`` are the CLI's ``--kind`` and ``--preset`` choices (click needs them
before any flow runs).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from typing import Any

from envbuild.errors import CheckFailed, EnvironmentProblem, InputError
from envbuild.smoke import KINDS, PRESETS

__all__ = ["KINDS", "PRESETS", "SmokeOutcome", "SmokeRequest", "smoke"]

DEFAULT_KINDS = ("gpt", "collective")


@dataclass(frozen=True)
class SmokeRequest:
    """``local`` (the only place smoke runs); ``python`` the environment's interpreter (None:
    this one); ``preset`` of the GPT benchmark; ``kinds`` to run (empty: gpt and collective);
    ``repeat`` each repeatable kind; ``out`` the file to write the results to."""

    local: bool = False
    python: str | None = None
    preset: str = "tiny"
    kinds: tuple[str, ...] = ()
    repeat: int = 1
    out: str | None = None


@dataclass(frozen=True)
class SmokeOutcome:
    """The interpreter used and ``{kind: result}`` as the smoke scripts report it."""

    python: str
    results: dict[str, dict[str, Any]] = field(default_factory=dict)

    def failure(self) -> CheckFailed | None:
        """The error the command ends with once the results are shown: None when all are ok."""
        bad = [k for k, r in self.results.items() if not r.get("ok")]
        if not bad:
            return None
        return CheckFailed(f"smoke not ok: {', '.join(bad)}", hint="rerun with --json to see each script's full result")


def _resolve_python(python: str | None) -> str:
    if python is None:
        return sys.executable
    found = shutil.which(python) if os.sep not in python else (python if os.access(python, os.X_OK) else None)
    if not found or not os.path.isfile(found):
        raise InputError(f"python interpreter {python!r} not found or not executable",
                         hint="give the environment's interpreter, e.g. --python /opt/env/bin/python")
    return found


def smoke(request: SmokeRequest) -> SmokeOutcome:
    """Run (see the module docstring). InputError without ``local`` or for a missing interpreter."""
    from envbuild.fsio import write_atomic
    from envbuild.smoke import local_runner, run_smoke

    if not request.local:
        raise InputError("envbuild smoke runs here only with --local",
                         hint="pass --local, or run the smoke on nodes with `envbuild provision`")
    interp = _resolve_python(request.python)
    results = run_smoke(interp, list(request.kinds) or list(DEFAULT_KINDS), request.preset, local_runner,
                        repeat=request.repeat)
    no_torch = [k for k, r in results.items() if "No module named 'torch'" in str(r.get("error", ""))]
    if no_torch:
        raise EnvironmentProblem(f"{interp} has no torch, so the smoke scripts cannot run",
                                 hint=f"install torch into that environment ({interp} -m pip install torch)")
    if request.out:
        write_atomic(request.out, json.dumps(results, indent=2, sort_keys=True) + "\n")
    return SmokeOutcome(python=interp, results=results)
