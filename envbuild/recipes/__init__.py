"""Recipes: the published setups, shipped as YAML in recipes/data/, or any user path."""

from __future__ import annotations

from pathlib import Path

from envbuild import catalog
from envbuild.errors import InputError
from envbuild.recipes.schema import Recipe

DATA = Path(__file__).parent / "data"


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
    defaults = [r for r in all_recipes() if r.default]
    if len(defaults) != 1:
        raise InputError(f"expected exactly one default recipe, found {len(defaults)}",
                         hint="mark one shipped recipe with 'default: true'")
    return defaults[0]
