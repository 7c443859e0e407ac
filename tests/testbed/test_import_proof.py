"""Proof by import on a CPU node: each recipe's Python environment, built by the real executor
(ansible-runner, local connection) from its lock, imports what its entry scripts import.

The modules come from the committed import fact (``envbuild imports``, read from the scripts at
the pinned commits). torch is the lock's CPU stand-in where the recipe pins a ``+cpu`` build
that only an unreachable index carries (PyPI's build of the same version). What an image, a
module or a node's venv provides, and what is pinned on an unreachable index, is replaced by the
stand-in the lock records for it (``stand_in``: PyPI's release of that version, or the nearest
one with why): the preinstalled ones in a stand-in of the base environment that the plan's
environment is made over (``envbuild.testbed.importproof``). What cannot be had here is
recorded with the reason: a package with no public stand-in (NVIDIA's Apex, Transformer Engine),
a Python missing on this machine, a source whose commit no git mirror holds (CI has no GitHub:
set ENVBUILD_GIT_MIRROR to check the sources out and import them too), Apex's CUDA extensions,
a build that reads the recipe's data or needs its base image (and the modules it makes), files
a mirror's snapshot lacks (``envbuild.testbed.importproof``).
The environments are installed as provision installs them, with the controller's uv; uv's
and pip's caches are shared between runs: $ENVBUILD_CACHE_DIR/import-proof-uv and -pip.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from envbuild.lock import lock_path, read_lock
from envbuild.lock.schema import normalize
from envbuild.recipes import all_recipes
from envbuild.scriptimports import read_fact
from envbuild.testbed.importproof import Unexercised, base_is_a_venv, cached_base, check_out_without
from envbuild.testbed.importproof import import_modules, interpreter, judge, node_path_with, proof_plan
from envbuild.testbed.importproof import stand_ins, tree_gaps
from envbuild.testbed.local_plan import run_local_plan
from envbuild.testbed.proofrecord import cpu_target, head_commit, inputs_digest, write_record

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.proof]

RECIPES = [r for r in all_recipes() if r.entry_scripts]


def _why_not(recipe, lock) -> str | None:
    """Why this recipe's environment cannot be built here, from its lock (None: it can)."""
    torch = lock.package("torch")
    if torch is None:
        return "the recipe installs no torch"
    if (torch.source == "preinstalled" or not torch.verified) and (
            torch.stand_in is None or torch.stand_in.version is None):
        return f"torch {torch.version}: {torch.reason}; the lock records no CPU stand-in for it"
    if interpreter(recipe.python) is None:
        return f"Python {recipe.python} is not on this machine"
    return None


def _top(module: str) -> str:
    return module.split(".", 1)[0]


@pytest.mark.parametrize("recipe", RECIPES, ids=[r.name for r in RECIPES])
def test_entry_script_imports_on_cpu(recipe, tmp_path, monkeypatch, record_property, proof_selection):
    target = cpu_target(recipe)
    if recipe.name in proof_selection.skip:
        pytest.skip(f"{recipe.name}: {proof_selection.skip[recipe.name]}")
    lock = read_lock(lock_path(recipe.name, target.name))
    fact = read_fact(recipe.name)
    assert fact is not None, f"run envbuild imports {recipe.name} --git-mirror DIR"
    if why := _why_not(recipe, lock):
        pytest.skip(f"{recipe.name}/{target.name}: {why}")
    cache = Path(os.environ.get("ENVBUILD_CACHE_DIR") or Path.home() / ".cache" / "envbuild")
    monkeypatch.setenv("PIP_CACHE_DIR", str(cache / "import-proof-pip"))  # one wheel cache
    monkeypatch.setenv("UV_CACHE_DIR", str(cache / "import-proof-uv"))  # uv's, where it installs
    mirror = os.environ.get("ENVBUILD_GIT_MIRROR")
    prefix = tmp_path / "env"
    python = interpreter(recipe.python)
    stand = stand_ins(lock)
    started = time.monotonic()
    base_python = None
    if stand.base:  # the image's / module's / node venv's packages, as PyPI releases, cached
        base_python, _built = cached_base(python, stand.base, base_is_a_venv(recipe))
    based = time.monotonic() - started
    mirror = mirror if mirror and Path(mirror).is_dir() else None
    proof = proof_plan(recipe, target, lock, str(prefix), mirror, base_python=base_python,
                       stand=stand, gaps=tree_gaps(recipe, lock, mirror))
    plan, left = proof.plan, proof.left + stand.left
    for step in plan.sources():  # a snapshot without some non-code files: checked out without them
        if step.params.name in proof.sparse:
            check_out_without(step.params.fetch_url, step.params.sha, step.params.dest,
                              proof.sparse[step.params.name])
    rc, host, events = run_local_plan(tmp_path, plan,
                                      node_path=node_path_with(python, recipe.python, tmp_path / "bin"))
    built = time.monotonic() - started
    failed = [e for e in events if e.get("kind") == "failed"]
    assert rc == 0, f"the environment did not build: {json.dumps(failed)[-3000:]}"

    checked_out = {s.params.name for s in plan.sources()}
    sources = {normalize(s.name) for s in recipe.sources}
    by_path, results = {}, {}
    for script in fact["scripts"]:
        by_path[script["path"]] = script
        modules = script["modules"] + script["optional"]
        root = prefix / "src" / script["component"]
        if script["component"] in checked_out:  # imported as the script does: its folder first
            here = root / Path(script["path"]).parent
            results[script["path"]] = import_modules(str(prefix / "bin" / "python"), modules,
                                                     cwd=str(root), paths=[str(here), str(root)])
            continue
        # no tree here: the modules it provides are not exercised, every other one is
        local = set(script["local"]) | {m for m in modules if normalize(_top(m)) in sources}
        for module in sorted(local):
            left.append(Unexercised(module, f"{script['component']}'s tree is not checked out here"))
        work = tmp_path / "elsewhere"
        work.mkdir(exist_ok=True)
        results[script["path"]] = import_modules(str(prefix / "bin" / "python"),
                                                 [m for m in modules if m not in local],
                                                 cwd=str(work), paths=[])
    verdict = judge(recipe, by_path, results, stand=stand, unbuilt=proof.unbuilt,
                    checked_out=checked_out)
    proven, unproven = verdict.proven, verdict.unproven
    left += verdict.left
    record_property("import_proof", json.dumps({
        "recipe": recipe.name, "target": target.name, "build_s": round(built, 1),
        "base_s": round(based, 1), "proven": proven,
        "stand_ins": [[d.outcome, d.reason] for d in stand.decisions],
        "unexercised": [[u.what, u.why] for u in left]}))
    print(f"\n{recipe.name}: {proven} imports proven in an environment built in {built:.0f} s "
          f"(base stand-in {based:.0f} s); stand-ins: "
          + "; ".join(f"{d.outcome} ({d.reason})" for d in stand.decisions)
          + "; not exercised: " + "; ".join(f"{u.what} ({u.why})" for u in left))
    assert not unproven, "imports that fail for a reason other than absent hardware:\n" + "\n".join(unproven)
    assert proven > 0
    if os.environ.get("ENVBUILD_RECORD_PROOFS") == "1":
        write_record(recipe.name, {
            "target": target.name, "inputs": inputs_digest(recipe.name, target.name),
            "date": time.strftime("%Y-%m-%d"), "commit": head_commit(),
            "command": f"ENVBUILD_RECORD_PROOFS=1 python -m pytest -m proof tests/testbed/test_import_proof.py -k {recipe.name}",
            "proven": proven, "build_s": round(built, 1), "base_s": round(based, 1),
            "stand_ins": [d.outcome for d in stand.decisions],
            "unexercised": [f"{u.what}: {u.why}" for u in left]})

