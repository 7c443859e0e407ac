"""The controller's build cache, ``<cache>/<key>/``: what one cache key's folder holds.

A key (``envbuild.plan``: ``ApexBuildParams.cache_key``, ``BuildParams.cache_key``) names one
build's inputs; its folder holds that build's product, as the provisioning playbook leaves it
there (``wheel.yml``: the extension wheel; ``tree_save.yml``: ``TREE_ARCHIVE``, the archive of a
source's in-tree build outputs, ``envbuild.node.treecache``) and a bundle carries and seeds it
(``envbuild.bundle.pack``, ``envbuild.bundle.unpack``).
"""
from __future__ import annotations

from pathlib import Path

TREE_ARCHIVE = "outputs.tar"


def cached_artifacts(folder: Path) -> list[Path]:
    """The products a key's folder holds: its wheels, then its archive of build outputs."""
    if not folder.is_dir():
        return []
    return [*sorted(folder.glob("*.whl")), *([folder / TREE_ARCHIVE] if (folder / TREE_ARCHIVE).is_file() else [])]
