"""Rows about the recipe itself, whatever the node: a drafted recipe's undecided fields."""

from __future__ import annotations

from envbuild.compat.context import Context
from envbuild.compat.rule import Rule


def _undecided(ctx: Context) -> str | None:
    """Every ``undecided:`` entry of the recipe, named with its reason (``envbuild draft``)."""
    left = ctx.recipe.undecided
    if not left:
        return None
    return (f"{ctx.recipe.name} leaves {len(left)} field(s) undecided: "
            + "; ".join(f"{u.field} ({u.why})" for u in left))


RULES: list[Rule] = [
    Rule("recipe-undecided", "error", "the recipe states fields its author has not decided yet",
         "envbuild draft writes what it cannot read from the repository as undecided: entries; a "
         "placeholder there would be built and judged as if the published setup said it",
         "envbuild/draft (docs/recipes.md, Drafting a recipe from a repository)",
         "fill each field named, then delete its entry from undecided:", _undecided),
]
