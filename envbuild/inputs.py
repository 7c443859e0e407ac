"""Turn command-line inputs into the data the library works on.

Shared by ``check``, ``plan`` and ``provision``: a recipe and a target by name or path, the
node facts (a facts file, live local facts for the ``local`` target, or the target's profile),
and the committed lock when there is one.
"""

from __future__ import annotations

from pathlib import Path

from envbuild.errors import InputError
from envbuild.facts.model import NodeFacts
from envbuild.facts.profile import from_target, refine
from envbuild.lock.check import check_lock_file
from envbuild.lock.location import locate_lock
from envbuild.recipes import default_recipe, load_recipe
from envbuild.recipes.schema import Recipe
from envbuild.targets import load_target
from envbuild.targets.schema import Target


def recipe_or_default(name: str | None) -> Recipe:
    return load_recipe(name) if name else default_recipe()


def node_facts(target: Target, facts_file: str | None = None) -> list[NodeFacts]:
    """Facts per node: from ``facts_file``, else live local facts for ``local``, else the profile.

    Live or file facts are completed by the target profile (``refine``).
    """
    if facts_file:
        from envbuild.facts.load import load_facts

        return [refine(target, f) for f in load_facts(facts_file)]
    if target.from_facts:
        from envbuild.facts.gather import gather_local

        return [gather_local()]
    return [from_target(target)]


def lock_source(recipe: Recipe, target: Target, lock_file: str | None = None,
                lockdir: Path | None = None) -> Path:
    """The lockfile a command reads: --lock, else ``envbuild.lock.location.locate_lock`` (the
    lockdir -- ``lockdir``, $ENVBUILD_LOCKDIR -- then the locks shipped with envbuild). It may
    not exist; never a path relative to the working directory unless given so."""
    return Path(lock_file) if lock_file else locate_lock(recipe.name, target.name, lockdir)


def find_lock(recipe: Recipe, target: Target, lock_file: str | None = None,
              lockdir: Path | None = None):
    """The lock at ``lock_source`` (--lock, the lockdir, the shipped locks), None when there is none.

    A lock that does not satisfy the recipe is refused (CheckFailed with the regenerate command).
    """
    path = lock_source(recipe, target, lock_file, lockdir)
    if lock_file and not path.is_file():
        raise InputError(f"lock file {lock_file} does not exist", hint="check the path or omit --lock")
    if path.is_file():
        return check_lock_file(path, recipe, target)
    return None


def recipe_and_target(recipe: str | None, target: str) -> tuple[Recipe, Target]:
    return recipe_or_default(recipe), load_target(target)
