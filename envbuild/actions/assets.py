"""envbuild's own files that actions copy to nodes or into images: ``<group>/<file>``.

    >>> asset_path("smoke/gpt.py").name
    'gpt.py'
"""

from __future__ import annotations

from pathlib import Path

from envbuild.errors import InputError
from envbuild.facts.uvbin import find_uv
from envbuild.shipped import ASSET_GROUPS


def _uv_folder() -> Path | None:
    """The folder of the controller's uv binary (``uv/uv``; see envbuild.facts.uvbin): the
    binary the planner pushed with its sha256, checked on the node by the uv step's effect."""
    found = find_uv()
    return Path(found).resolve().parent if found and Path(found).name == "uv" else None


def _folder(group: str) -> Path | None:
    return _uv_folder() if group == "uv" else ASSET_GROUPS.get(group)


def asset_path(asset: str) -> Path:
    """The controller-side file of ``asset``; a name, never a path outside its group."""
    group, _, name = asset.partition("/")
    folder = _folder(group)
    if folder is None or not name or "/" in name or name.startswith("."):
        raise InputError(f"unknown asset {asset!r}")
    path = folder / name
    if not path.is_file():
        raise InputError(f"asset {asset!r} is missing at {path}")
    return path


def asset_source(asset: str) -> str:
    """Where ``asset`` lies on the controller (pure: no check that it exists)."""
    group, _, name = asset.partition("/")
    folder = _folder(group)
    if folder is None or not name or "/" in name or name.startswith("."):
        raise InputError(f"unknown asset {asset!r}")
    return str(folder / name)
