"""Loopback test nodes share this machine's uv cache (``~/.cache/uv``): every node's copy of a
pushed wheel is another local path, so uv unpacks it once per node (torch: ~700 MB each).
``archives()`` lists the cache's unpacked archives; ``prune_new(before)`` removes the ones made
since ``before`` that no environment links to any more (every file's link count is 1: the
environments that used them are gone), so a bench or a test leaves the cache as it found it."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path


def cache_dir() -> Path:
    return Path(os.environ.get("UV_CACHE_DIR") or Path.home() / ".cache" / "uv")


def archives() -> set[str]:
    root = cache_dir() / "archive-v0"
    return {p.name for p in root.iterdir()} if root.is_dir() else set()


def _unlinked(folder: Path) -> bool:
    for dirpath, _dirs, files in os.walk(folder):
        for f in files:
            try:
                if os.lstat(os.path.join(dirpath, f)).st_nlink > 1:
                    return False
            except OSError:
                continue
    return True


def prune_new(before: set[str]) -> int:
    """Remove the archives made since ``before`` that nothing links to; returns how many."""
    root, n = cache_dir() / "archive-v0", 0
    for name in sorted(archives() - before):
        folder = root / name
        if folder.is_dir() and _unlinked(folder):
            shutil.rmtree(folder, ignore_errors=True)
            n += 1
    return n


@contextlib.contextmanager
def loopback_fleet(base: Path, count: int, first_address: int, remove=shutil.rmtree):
    """``count`` loopback sshd nodes (``envbuild.testbed.sshd``) for a fleet of environments
    under ``base / "envs"``; on exit those environments go (``remove``), then the uv archives
    only they linked to (the nodes share this machine's cache)."""
    from envbuild.testbed import sshd

    before = archives()
    with sshd.ssh_nodes(count, first_address=first_address) as nodes:
        yield nodes
    remove(base / "envs")
    prune_new(before)
