"""The CPU import proof of a recipe (tests/test_import_proof.py): its Python environment built
by the real executor from its lock, then every module its entry scripts import, imported.

``proof_plan`` is the recipe's own plan for a CPU node (the lock's torch stand-in for a ``+cpu``
pin, ``envbuild.lock.packages.cpu_stand_in``), cut to the steps that make the Python
environment: venv, pip tooling, locked packages, git checkouts, their CPU builds and installs.
Every step left out is named with the reason (``Unexercised``) and so is every source whose
commit the git mirror lacks. ``import_modules`` runs the environment's python once over the
module list from the recipe's import fact (``envbuild.scriptimports``) and returns, per
module, ``ok`` or the exception, with the missing module's name for a ModuleNotFoundError.
"""

from __future__ import annotations

import glob
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from envbuild.facts.profile import from_target
from envbuild.plan.build import PlanOptions, build_plan
from envbuild.plan.model import Plan
from envbuild.plan.resolve import fetch_urls
from envbuild.recipes.schema import Recipe
from envbuild.targets.schema import Target

KEPT = {"environment", "pip_tooling", "pip_install", "git_source", "install_source", "build"}
WHY_LEFT_OUT = {
    "apex_build": "Apex's C++/CUDA extensions ({options}) need nvcc and a CUDA torch",
    "patch": "patch {id}: applies to a tree this proof does not build ({why})",
    "data": "the recipe's data downloads (not needed to import)",
    "system_packages": "system packages (apt) of the node",
    "preflight": "the preflight verdict (no GPU here)",
}


@dataclass(frozen=True)
class Unexercised:
    what: str
    why: str


def interpreter(version: str) -> str | None:
    """A CPython ``version`` (``"3.9"``) here: this one, else pyenv's, else None."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return sys.executable
    found = sorted(glob.glob(f"/root/.pyenv/versions/{version}.*/bin/python{version}"))
    return found[-1] if found else None


def proof_plan(recipe: Recipe, target: Target, lock, prefix: str,
               mirror: str | None) -> tuple[Plan, list[Unexercised]]:
    """The recipe's plan on a CPU node of ``target``, cut to its Python environment."""
    facts = from_target(target).model_copy(update={"gpus": []})
    opts = PlanOptions(prefix=prefix, backend="venv", smoke=False,
                       fetch_urls=fetch_urls(recipe, mirror, lock))
    plan = build_plan(recipe, target, facts, lock, opts)
    left: list[Unexercised] = []
    def unpinned(name: str) -> bool:  # the lock could not find the commit in the mirror
        pin = lock.git_pin(name) if lock is not None else None
        return pin is not None and not pin.verified

    absent = {s.params.name for s in plan.steps if s.kind == "git_source"
              and (s.params.url not in opts.fetch_urls or unpinned(s.params.name))}
    # Apex is only built with its CUDA extensions: its checkout (and the cutlass submodule
    # some options fetch) serves nothing here
    cuda_built = {s.params.name for s in plan.steps if s.kind == "git_source"
                  and any(t.kind == "apex_build" and t.params.dest == s.params.dest for t in plan.steps)}
    for name in sorted(absent):
        pin = lock.git_pin(name) if lock is not None else None
        left.append(Unexercised(f"source {name}", "its commit is in no git mirror here"
                                + (f" ({pin.reason})" if pin is not None and pin.reason else "")))
    kept = []
    for step in plan.steps:
        component = getattr(step.params, "name", None) or getattr(step.params, "component", None)
        if step.kind in KEPT and component not in absent | cuda_built:
            kept.append(step)
        elif step.kind in WHY_LEFT_OUT:
            params = step.params
            left.append(Unexercised(step.id, WHY_LEFT_OUT[step.kind].format(
                options=" ".join(getattr(params, "options", []) or []),
                id=getattr(params, "id", step.id), why=(getattr(params, "why", "") or "")[:80])))
    return plan.model_copy(update={"steps": kept}), left


PROBE = r"""
import importlib, json, sys, traceback
out = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
        out[name] = {"ok": True}
    except BaseException as exc:  # SystemExit from an argparse at import time counts too
        missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
        out[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300], "missing": missing}
print("IMPORT-PROOF " + json.dumps(out))
"""


def import_modules(python: str, modules: list[str], cwd: str, paths: list[str]) -> dict:
    """``{module: {"ok": bool, "error"?, "missing"?}}``, importing in one interpreter run with
    ``paths`` first on sys.path (the script's folder, as Python puts it there)."""
    env = {"PYTHONPATH": ":".join(paths), "PATH": "/usr/bin:/bin", "HOME": cwd,
           "PYTHONDONTWRITEBYTECODE": "1", "WANDB_MODE": "disabled"}
    proc = subprocess.run([python, "-c", PROBE, *modules], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("IMPORT-PROOF ")), None)
    if line is None:
        raise RuntimeError(f"the import probe did not report (rc {proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(line.removeprefix("IMPORT-PROOF "))


def node_path_with(python: str, version: str, bin_dir: Path) -> str:
    """A search path whose ``python<version>`` is ``python`` (the plan's venv is made with it)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    link = bin_dir / f"python{version}"
    if not link.exists():
        link.symlink_to(python)
    return f"{bin_dir}:/usr/local/bin:/usr/bin:/bin"
