"""One resolution for ``plan``, ``check`` and ``provision``: facts refined by the target
profile, the preflight verdict, and the plan built from them.

``resolve`` is pure; ``fetch_urls`` is the one place that looks at the controller's disk
(the git mirror folder), and its result is an input of the plan, so ``envbuild plan --json``
with the same facts, lock and options prints the plan that ``provision`` executes.
``Resolved`` and ``check_facts`` live in ``envbuild.plan.node_plan`` (imported here by their
names): the image plan resolves what an image holds through that module, never through this
one, which also plans images (``envbuild.plan.container``), so no import goes round.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from envbuild.facts.model import NodeFacts
from envbuild.gitsrc import mirror_path
from envbuild.plan.build import PlanOptions, verdict_summary
from envbuild.plan.node_plan import Resolved, check_facts, resolve_environment
from envbuild.recipes.schema import Recipe
from envbuild.targets.schema import Target


def fetch_urls(recipe: Recipe, git_mirror: str | None, lock: object | None = None) -> dict[str, str]:
    """``{source url: mirror path}`` for the recipe's git sources found in ``git_mirror``, and
    for the git dependencies of its source installs that ``lock`` pins."""
    if not git_mirror:
        return {}

    out = {}
    urls = [s.url for s in recipe.sources] + [g.url for g in getattr(lock, "git", None) or []]
    for url in urls:
        found = mirror_path(url, Path(git_mirror))
        if found:
            out[url] = str(found)
    from envbuild.patches.apex_options import submodules_for  # Apex submodules (cutlass) too

    for _, url in submodules_for(list(recipe.apex.build_options) if recipe.apex else []):
        if found := mirror_path(url, Path(git_mirror)):
            out[url] = str(found)
    return out


def default_backend(recipe: Recipe, backend: str | None) -> str | None:
    """The backend ``plan`` and ``provision`` use: the one asked for, else ``container`` for a
    recipe whose environment is a container image (the image is built on the node), else
    None (the recipe's own environment kind)."""
    return backend or ("container" if recipe.environment.kind == "container" else None)


def resolve(recipe: Recipe, target: Target, facts: NodeFacts, lock: object | None,
            options: PlanOptions) -> Resolved:
    """Refine ``facts``, check them, and plan the node (the plan carries the verdict).
    ``options.backend == "container"``: the node plan builds the recipe's image on the node
    and checks it there (``envbuild.plan.container``); else the node's own environment
    (``envbuild.plan.node_plan``, which the image plan also uses for what an image holds)."""
    if options.backend == "container":
        # deferred: only a container backend's plan needs the image planner and its renderers
        # (8 modules every other command would load at start-up, a no-op provision included)
        from envbuild.plan.container import container_plan

        refined, verdict = check_facts(recipe, target, facts, backend="container", smoke=options.smoke)
        plan = container_plan(recipe, target, refined, lock, replace(options, verdict=verdict_summary(verdict)))
        return Resolved(facts=refined, verdict=verdict, plan=plan)
    return resolve_environment(recipe, target, facts, lock, options)
