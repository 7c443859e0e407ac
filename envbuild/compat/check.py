"""Preflight: evaluate every compatibility row for (recipe, target, node facts) at once."""

from __future__ import annotations

import functools

from typing import Literal

from pydantic import BaseModel, ConfigDict

from envbuild.compat.context import build_context
from envbuild.compat.rules import RULES, Rule
from envbuild.facts.model import NodeFacts
from envbuild.recipes import all_recipes
from envbuild.recipes.schema import Recipe
from envbuild.targets import load_target
from envbuild.targets.schema import Target


class Violation(BaseModel):
    """One violated row, with the concrete values of this node and recipe."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    rule: str
    severity: Literal["error", "warning"]
    message: str
    what: str
    why: str
    source: str
    fix: str


class Variant(BaseModel):
    """A shipped recipe that moves this one to other hardware (its ``variant_of``), locked for
    targets whose GPU architecture is one of the node's."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    recipe: str
    targets: list[str]
    title: str


@functools.lru_cache(maxsize=1)
def _shipped_variants() -> dict[str, tuple[Recipe, ...]]:
    """The shipped recipes that name a ``variant_of``, by that name: read once per process (the
    shipped files do not change while it runs), not once per refused node of a fleet."""
    out: dict[str, list[Recipe]] = {}
    for other in all_recipes():
        if other.variant_of:
            out.setdefault(other.variant_of, []).append(other)
    return {name: tuple(found) for name, found in out.items()}


def variants_for(recipe: Recipe, facts: NodeFacts) -> list[Variant]:
    """The shipped variants of ``recipe`` (``variant_of: <recipe>``) with a target whose GPU
    compute capability the node has: what ``envbuild check`` names when ``recipe`` is refused.

        variants_for(load_recipe("alpa-megatron"), h100_facts)  # [alpa-megatron-h100 on h100-venv]
    """
    found = []
    for other in _shipped_variants().get(recipe.name, ()):
        fit = []
        for name in other.targets:
            gpus = load_target(name).gpus
            if gpus is not None and gpus.compute_capability in facts.archs:
                fit.append(name)
        if fit:
            found.append(Variant(recipe=other.name, targets=fit, title=other.title))
    return found


class Verdict(BaseModel):
    """The preflight result for one node: feasible when no error row is violated."""

    feasible: bool
    recipe: str
    target: str
    host: str
    origin: str
    torch_variant: str | None
    torch_reason: str | None
    violations: list[Violation]
    passed: list[str]
    variants: list[Variant] = []  # named when infeasible: shipped variants for the node's GPU

    @property
    def errors(self) -> list[Violation]:
        return [v for v in self.violations if v.severity == "error"]

    @property
    def warnings(self) -> list[Violation]:
        return [v for v in self.violations if v.severity == "warning"]

    def to_json(self) -> str:
        return self.model_dump_json(indent=2) + "\n"

    def summary(self) -> str:
        """One line: ``FEASIBLE alpa-megatron on azure-nd96 (host): 0 errors, 2 warnings``."""
        word = "FEASIBLE" if self.feasible else "INFEASIBLE"
        torch = f", torch {self.torch_variant}" if self.torch_variant else ""
        return (f"{word}: {self.recipe} on {self.target} ({self.host}{torch}): "
                f"{len(self.errors)} error(s), {len(self.warnings)} warning(s)")


def _violation(rule: Rule, message: str) -> Violation:
    return Violation(rule=rule.id, severity=rule.severity, message=message, what=rule.what,
                     why=rule.why, source=rule.source, fix=rule.fix)


def preflight(recipe: Recipe, target: Target, facts: NodeFacts, rules: list[Rule] | None = None) -> Verdict:
    """Evaluate every rule row and report every violated one (errors first, table order).

    ``facts`` are live facts, profile facts (``envbuild.facts.profile.from_target``) or both
    merged (``refine``). Example::

        v = preflight(load_recipe("alpa-megatron"), load_target("h100"), from_target(h100))
        v.feasible  # False: torch 1.8.2+cu111 has no sm_90 kernels ...
    """
    ctx = build_context(recipe, target, facts)
    found: list[Violation] = []
    passed: list[str] = []
    for r in rules if rules is not None else RULES:
        msg = r.evaluate(ctx)
        if msg:
            found.append(_violation(r, msg))
        else:
            passed.append(r.id)
    found.sort(key=lambda v: v.severity != "error")
    feasible = not any(v.severity == "error" for v in found)
    return Verdict(
        feasible=feasible,
        recipe=recipe.name, target=target.name, host=facts.host, origin=facts.origin,
        torch_variant=ctx.torch.label if ctx.torch else None,
        torch_reason=ctx.torch.reason if ctx.torch else None,
        violations=found, passed=passed,
        variants=[] if feasible else variants_for(recipe, facts),
    )


# rows about the benchmark's run alone: the environment an install makes does not depend on them
BENCHMARK_ONLY = frozenset({"too-few-gpus"})


def without_benchmark(verdict: Verdict) -> Verdict:
    """The verdict for an install whose benchmark does not run (``provision --no-smoke``): an error
    of a row that concerns only the benchmark's run (``BENCHMARK_ONLY``) becomes a warning that
    says so. The environment is the same on a node with fewer GPUs; a provision that runs the
    benchmark there is refused by the same row, as before."""
    if not any(v.rule in BENCHMARK_ONLY and v.severity == "error" for v in verdict.violations):
        return verdict
    found = [v.model_copy(update={"severity": "warning",
                                  "message": f"{v.message} (--no-smoke: the environment is installed; "
                                             f"its benchmark cannot run on this node)"})
             if v.rule in BENCHMARK_ONLY and v.severity == "error" else v for v in verdict.violations]
    found.sort(key=lambda v: v.severity != "error")
    feasible = not any(v.severity == "error" for v in found)
    return verdict.model_copy(update={"violations": found, "feasible": feasible,
                                      "variants": [] if feasible else verdict.variants})


def preflight_nodes(recipe: Recipe, target: Target, nodes: list[NodeFacts]) -> list[Verdict]:
    """One verdict per node (the recipe is feasible on the set when every verdict is)."""
    return [preflight(recipe, target, f) for f in nodes]
