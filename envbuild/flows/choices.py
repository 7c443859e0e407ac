"""What the CLI offers before any flow runs: the names its shell completion proposes and the
defaults its help text states (``envbuild.cli.options``), read from the layers that own them.
The name lists import the recipe and target models only when completion asks (a command's
module is imported at every start of that command)."""

from __future__ import annotations

from envbuild.bundle.provenance import DEFAULT_VALID_DAYS

__all__ = ["DEFAULT_VALID_DAYS", "recipe_names", "target_names"]


def recipe_names() -> list[str]:
    from envbuild.recipes import recipe_names as names

    return list(names())


def target_names() -> list[str]:
    from envbuild.targets import target_names as names

    return list(names())
