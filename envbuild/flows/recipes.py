"""The recipes and show flows: the shipped recipes listed, one recipe loaded in full.

``recipes(RecipesRequest(...)) -> RecipesOutcome``: the recipes named (shipped names or YAML
paths; none: every shipped recipe), each as the one-line row ``envbuild recipes --json`` prints.
``show(ShowRequest(...)) -> ShowOutcome``: one recipe loaded (a file's errors point at its line:
``x.yaml:12: packages[3].version: required field is missing``), or the recipe JSON Schema.
``load_recipe_arg`` is public for the parse flow, which takes a recipe the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from envbuild.errors import InputError
from envbuild.recipes import DATA, all_recipes, load_recipe
from envbuild.recipes.schema import Recipe


@dataclass(frozen=True)
class RecipesRequest:
    """``recipes``: shipped names or YAML paths (empty: every shipped recipe)."""

    recipes: tuple[str, ...] = ()


@dataclass(frozen=True)
class RecipesOutcome:
    """One summary row per recipe (``summary_row``), in the order asked (shipped: by name)."""

    rows: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class ShowRequest:
    """``recipe`` (a shipped name or a YAML path) to load; ``schema``: the recipe JSON Schema
    instead (no recipe needed)."""

    recipe: str | None = None
    schema: bool = False


@dataclass(frozen=True)
class ShowOutcome:
    """The recipe loaded, or (``schema``) the JSON Schema of every recipe field."""

    recipe: Recipe | None = None
    schema: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The --json form: the schema, else the full recipe by its YAML field names."""
        if self.recipe is None:
            return self.schema or {}
        return json.loads(self.recipe.model_dump_json(by_alias=True))


def load_recipe_arg(name_or_path: str) -> Recipe:
    """``load_recipe`` with a pointed hint when the file is a target profile, not a recipe."""
    try:
        return load_recipe(name_or_path)
    except InputError as exc:
        if "this is a target profile" in exc.message:
            exc.message = exc.message.replace("<top>: Value error, ", "")
            exc.hint = (f"pass it as a target (`--target {name_or_path}`); recipes live in "
                        f"{DATA} and have published/packages/sources")
        raise


def summary_row(recipe: Recipe) -> dict[str, Any]:
    """The one-line facts `envbuild recipes --json` prints per recipe."""
    return {
        "name": recipe.name,
        "title": recipe.title,
        "default": recipe.default,
        "python": recipe.python,
        "environment": recipe.environment.kind,
        "launcher": recipe.launcher,
        "targets": list(recipe.targets),
        "resolve_as_of": recipe.resolve_as_of,
        "sources": len(recipe.sources),
        "packages": len(recipe.packages),
        "deviations": len(recipe.deviations),
    }


def recipes(request: RecipesRequest) -> RecipesOutcome:
    """The recipes asked for, each as its summary row (see the module docstring)."""
    found = [load_recipe_arg(r) for r in request.recipes] if request.recipes else all_recipes()
    return RecipesOutcome(rows=[summary_row(r) for r in found])


def show(request: ShowRequest) -> ShowOutcome:
    """One recipe, or the schema (see the module docstring). InputError without a recipe."""
    if request.schema:
        return ShowOutcome(schema=Recipe.model_json_schema(by_alias=True))
    if not request.recipe:
        raise InputError("envbuild show needs a RECIPE (a shipped name or a YAML path)",
                         hint="list the shipped recipes with `envbuild recipes`")
    return ShowOutcome(recipe=load_recipe_arg(request.recipe))
