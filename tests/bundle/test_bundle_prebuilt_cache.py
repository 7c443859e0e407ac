"""A bundle's carried extension wheel (or archive of a build step's in-tree outputs) seeds the
controller's build cache only where the key's folder holds none; a folder that holds other bytes
is named (``prebuilt_not_used``): the provision pushes the cache's, so the report must not say the
carried one was used."""

from __future__ import annotations

import hashlib
from pathlib import Path

from envbuild.bundle.buildcache import TREE_ARCHIVE
from envbuild.bundle.manifest import BundleFile, Manifest
from envbuild.bundle.unpack import Opened

KEY = "apex-6424da3b4faa-837967d631b5195728b8"
WHEEL = "apex-0.1-cp311-cp311-linux_x86_64.whl"
TREE_KEY = "tree-megatron-c28bbd208d16-0123456789abcdef0123"


def _opened(tmp_path: Path, data: bytes, key: str = KEY, name: str = WHEEL) -> Opened:
    root = tmp_path / "bundle"
    (root / "prebuilt" / key).mkdir(parents=True)
    (root / "prebuilt" / key / name).write_bytes(data)
    f = BundleFile(path=f"prebuilt/{key}/{name}", sha256=hashlib.sha256(data).hexdigest(), size=len(data),
                   kind="prebuilt", name=key)
    manifest = Manifest(recipe="r", target="t", lock_digest="0" * 64, envbuild_version="0", python="3.11", files=[f])
    return Opened(file=tmp_path / "b.tar", digest="0" * 64, root=root, manifest=manifest)


def test_an_empty_cache_is_seeded_and_the_carried_wheel_is_the_one_used(tmp_path):
    b, cache = _opened(tmp_path, b"carried"), tmp_path / "cache"
    assert b.seed_build_cache(cache) == [KEY]
    assert (cache / KEY / WHEEL).read_bytes() == b"carried"
    assert b.prebuilt_not_used(cache) == []
    assert b.seed_build_cache(cache) == [] and b.prebuilt_not_used(cache) == []  # the same bytes: still used


def test_a_cache_holding_other_bytes_keeps_them_and_names_the_key(tmp_path):
    b, cache = _opened(tmp_path, b"carried"), tmp_path / "cache"
    (cache / KEY).mkdir(parents=True)
    (cache / KEY / WHEEL).write_bytes(b"built here earlier")
    assert b.seed_build_cache(cache) == []
    assert (cache / KEY / WHEEL).read_bytes() == b"built here earlier"
    assert b.prebuilt_not_used(cache) == [KEY]


def test_a_second_wheel_beside_the_carried_one_makes_it_unsure(tmp_path):
    b, cache = _opened(tmp_path, b"carried"), tmp_path / "cache"
    b.seed_build_cache(cache)
    (cache / KEY / "apex-0.2-cp311-cp311-linux_x86_64.whl").write_bytes(b"another")
    assert b.prebuilt_not_used(cache) == [KEY]


def test_an_archive_of_build_outputs_is_seeded_once_and_another_in_the_cache_is_named(tmp_path):
    b, cache = _opened(tmp_path, b"outputs", TREE_KEY, TREE_ARCHIVE), tmp_path / "cache"
    assert b.seed_build_cache(cache) == [TREE_KEY]
    assert (cache / TREE_KEY / TREE_ARCHIVE).read_bytes() == b"outputs" and b.prebuilt_not_used(cache) == []
    other = _opened(tmp_path / "other", b"built elsewhere", TREE_KEY, TREE_ARCHIVE)
    assert other.seed_build_cache(cache) == []
    assert (cache / TREE_KEY / TREE_ARCHIVE).read_bytes() == b"outputs"
    assert other.prebuilt_not_used(cache) == [TREE_KEY]
