"""The check flow: a recipe preflighted on a target, every compatibility rule on every node.

``check(CheckRequest(...)) -> CheckOutcome``: the recipe and the target loaded, the node facts
(``facts_file``: one object or a list, each completed by the target profile; else live facts
for ``local``, else the profile's documented ones: ``envbuild.inputs.node_facts``), and one
preflight verdict per node (``envbuild.plan.resolve.check_facts``). The caller shows the
verdicts, then ends with ``failure()``: a CheckFailed naming the violated error rules (exit 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envbuild.compat.check import Verdict
from envbuild.errors import CheckFailed


@dataclass(frozen=True)
class CheckRequest:
    """``recipe`` and ``target`` (names or YAML paths); ``facts_file`` a node facts JSON."""

    recipe: str
    target: str
    facts_file: str | None = None


@dataclass(frozen=True)
class CheckOutcome:
    """The recipe's and the target's names, and one verdict per node."""

    recipe: str
    target: str
    verdicts: list[Verdict] = field(default_factory=list)

    def to_json(self) -> Any:
        """The --json form: one verdict's object, or a list for several nodes."""
        dumped = [v.model_dump(mode="json") for v in self.verdicts]
        return dumped if len(self.verdicts) > 1 else dumped[0]

    def failure(self) -> CheckFailed | None:
        """The error the command ends with once the verdicts are shown: None when every node is
        feasible, else the violated error rules, with the variant recipes that fit the GPU."""
        bad = [v for v in self.verdicts if not v.feasible]
        if not bad:
            return None
        rules = sorted({x.rule for v in bad for x in v.errors})
        variants = sorted({x.recipe for v in bad for x in v.variants})
        hint = "apply the fixes listed for each error rule, or pick another target"
        if variants:
            hint += f", or the variant recipe {' / '.join(variants)}"
        return CheckFailed(f"{self.recipe} is infeasible on {self.target} "
                           f"({len(bad)} of {len(self.verdicts)} node(s)): {', '.join(rules)}", hint=hint)


def check(request: CheckRequest) -> CheckOutcome:
    """Preflight (see the module docstring). InputError for a bad recipe, target or facts file."""
    from envbuild.inputs import node_facts
    from envbuild.plan.resolve import check_facts
    from envbuild.recipes import load_recipe
    from envbuild.targets import load_target

    rec = load_recipe(request.recipe)
    tgt = load_target(request.target)
    verdicts = [check_facts(rec, tgt, f)[1] for f in node_facts(tgt, request.facts_file)]
    return CheckOutcome(recipe=rec.name, target=tgt.name, verdicts=verdicts)
