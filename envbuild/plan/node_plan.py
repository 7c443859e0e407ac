"""A node's plan of its own environment (venv, conda, environment module): the facts refined by
the target profile, the preflight verdict on them, and the plan built from both. Pure.

``envbuild.plan.resolve`` is the one resolution every command calls; it hands a node whose
environment is its own to ``resolve_environment`` and a container backend to
``envbuild.plan.container``. The image plan (``envbuild.render.image``) plans what an image
holds with ``resolve_environment`` directly: an image's environment is always a venv, and
importing this module instead of ``plan.resolve`` keeps the imports from going round
(``plan.container`` -> ``render.image`` -> here, never back).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from envbuild.compat.check import Verdict, preflight, without_benchmark
from envbuild.compat.rules import RULES
from envbuild.compat.rules_container import CONTAINER_RULES
from envbuild.facts.model import NodeFacts
from envbuild.facts.profile import refine
from envbuild.plan.build import PlanOptions, build_plan, verdict_summary
from envbuild.plan.model import Plan
from envbuild.recipes.schema import Recipe
from envbuild.targets.schema import Target


@dataclass(frozen=True)
class Resolved:
    facts: NodeFacts  # live or file facts completed by the target profile
    verdict: Verdict
    plan: Plan

    @property
    def feasible(self) -> bool:
        return bool(self.verdict.feasible)


def check_facts(recipe: Recipe, target: Target, facts: NodeFacts,
                backend: str | None = None, smoke: bool = True) -> tuple[NodeFacts, Verdict]:
    """``facts`` completed by the target profile, and the preflight verdict on them.
    ``backend="container"``: the image is built on the node; the node-side rows are those of a
    container recipe, plus ``envbuild.compat.rules_container`` (engine, enroot for pyxis).
    ``smoke=False`` (an install without its benchmark): a row about the benchmark's run alone is
    a warning (``envbuild.compat.check.without_benchmark``)."""
    refined = refine(target, facts)
    if backend == "container":
        env = recipe.environment.model_copy(update={"kind": "container"})
        as_image = recipe.model_copy(update={"environment": env})
        verdict = preflight(as_image, target, refined, rules=[*RULES, *CONTAINER_RULES])
    else:
        verdict = preflight(recipe, target, refined)
    return refined, (verdict if smoke else without_benchmark(verdict))


def resolve_environment(recipe: Recipe, target: Target, facts: NodeFacts, lock: object | None,
                        options: PlanOptions) -> Resolved:
    """Refine ``facts``, check them, and plan the node's own environment (the plan carries the
    verdict); ``options.backend`` must not be ``container`` (``envbuild.plan.resolve`` plans that)."""
    if options.backend == "container":
        raise ValueError("resolve_environment plans a node's own environment; envbuild.plan.resolve "
                         "plans the container backend")
    refined, verdict = check_facts(recipe, target, facts, smoke=options.smoke)
    plan = build_plan(recipe, target, refined, lock, replace(options, verdict=verdict_summary(verdict)))
    return Resolved(facts=refined, verdict=verdict, plan=plan)
