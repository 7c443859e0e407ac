"""What the CLI offers before any flow runs: the names its shell completion proposes and the
defaults its help text states (``envbuild.cli.options``), read from the layers that own them."""

from __future__ import annotations

from envbuild.bundle.provenance import DEFAULT_VALID_DAYS
from envbuild.recipes import recipe_names
from envbuild.targets import target_names

__all__ = ["DEFAULT_VALID_DAYS", "recipe_names", "target_names"]
