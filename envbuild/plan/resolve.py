"""One resolution for ``plan``, ``check`` and ``provision``: facts refined by the target
profile, the preflight verdict, and the plan built from them.

``resolve`` is pure; ``fetch_urls`` is the one place that looks at the controller's disk
(the git mirror folder), and its result is an input of the plan, so ``envbuild plan --json``
with the same facts, lock and options prints the plan that ``provision`` executes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from envbuild.compat.check import Verdict, preflight
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


def fetch_urls(recipe: Recipe, git_mirror: str | None) -> dict[str, str]:
    """``{source url: mirror path}`` for the recipe's git sources found in ``git_mirror``."""
    if not git_mirror:
        return {}
    from envbuild.gitsrc import mirror_path

    out = {}
    for src in recipe.sources:
        found = mirror_path(src.url, Path(git_mirror))
        if found:
            out[src.url] = str(found)
    return out


def check_facts(recipe: Recipe, target: Target, facts: NodeFacts) -> tuple[NodeFacts, Verdict]:
    """``facts`` completed by the target profile, and the preflight verdict on them."""
    refined = refine(target, facts)
    return refined, preflight(recipe, target, refined)


def resolve(recipe: Recipe, target: Target, facts: NodeFacts, lock: object | None,
            options: PlanOptions) -> Resolved:
    """Refine ``facts``, check them, and plan the node (the plan carries the verdict)."""
    refined, verdict = check_facts(recipe, target, facts)
    plan = build_plan(recipe, target, refined, lock, replace(options, verdict=verdict_summary(verdict)))
    return Resolved(facts=refined, verdict=verdict, plan=plan)
