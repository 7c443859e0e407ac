"""Target profiles, shipped as YAML in targets/data/, or any user path."""

from __future__ import annotations

from pathlib import Path

from envbuild import catalog
from envbuild.shipped import TARGETS
from envbuild.targets.schema import Target

DATA = TARGETS


def load_target(name_or_path: str | Path) -> Target:
    """Load a shipped target by name (``azure-nd96``) or a target YAML file by path."""
    return catalog.load(Target, name_or_path, DATA, "target")


def target_names() -> list[str]:
    return list(catalog.shipped(DATA))
