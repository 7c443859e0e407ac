"""A recipe's plan for a node of its target whose container engines are given (``{"podman":
"4.9.3", "enroot": "3.5.0"}``): the container backend's node plan as data, for the plan and
launch tests."""

from __future__ import annotations

from envbuild.inputs import find_lock
from envbuild.plan.build import PlanOptions
from envbuild.plan.resolve import default_backend, resolve
from envbuild.recipes import load_recipe
from envbuild.targets import load_target
from support.ib_inventory import profile_facts


def engine_facts(target, engines: dict[str, str], home: str = "/home/u"):
    return profile_facts(target).model_copy(update={"container_engines": engines, "home": home, "host": "n1"})


def engine_plan(recipe: str, target: str, engines: dict[str, str], **opts):
    rec, tgt = load_recipe(recipe), load_target(target)
    res = resolve(rec, tgt, engine_facts(tgt, engines), find_lock(rec, tgt),
                  PlanOptions(backend=default_backend(rec, opts.pop("backend", None)), host="n1", **opts))
    return rec, tgt, res
