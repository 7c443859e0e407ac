"""Recipes: the published setups, shipped as YAML in recipes/data/, or any user path."""

from __future__ import annotations

from pathlib import Path

import yaml

from envbuild import catalog
from envbuild.errors import InputError
from envbuild.recipes.schema import Recipe
from envbuild.shipped import RECIPES

DATA = RECIPES


def load_recipe(name_or_path: str | Path) -> Recipe:
    """Load a shipped recipe by name (``alpa-megatron``) or a recipe YAML file by path."""
    return catalog.load(Recipe, name_or_path, DATA, "recipe")


def recipe_names() -> list[str]:
    return list(catalog.shipped(DATA))


def all_recipes() -> list[Recipe]:
    return [load_recipe(p) for p in catalog.shipped(DATA).values()]


def is_shipped(recipe: Recipe) -> bool:
    """Whether ``recipe`` is one shipped with envbuild, unchanged (same name, same content)."""
    path = catalog.shipped(DATA).get(recipe.name)
    return path is not None and catalog.digest(load_recipe(path)) == catalog.digest(recipe)


def default_recipe() -> Recipe:
    """The shipped recipe marked ``default: true``: only that one is loaded and validated (every
    shipped recipe through envbuild's YAML reader took a second of each command without one)."""
    defaults = [p for p in catalog.shipped(DATA).values() if _marked_default(p)]
    if len(defaults) != 1:
        raise InputError(f"expected exactly one default recipe, found {len(defaults)}",
                         hint="mark one shipped recipe with 'default: true'")
    recipe = load_recipe(defaults[0])
    if not recipe.default:  # the quick read and the schema disagree: a bug, said loudly
        raise InputError(f"{defaults[0]} reads as default: true but its recipe is not the default")
    return recipe


def _marked_default(path: Path) -> bool:
    """Whether a shipped recipe's top level says ``default: true`` (libyaml's safe loader where
    present: data only, no line numbers; the full reader runs on the one that is)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506 - a safe loader
    return isinstance(data, dict) and data.get("default") is True
