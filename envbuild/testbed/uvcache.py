"""Loopback test nodes share this machine's file system, so by default they would share its uv
cache (``~/.cache/uv``). Every install step runs uv with ``--link-mode copy``, so nothing in an
environment links to that cache: no test can tell its own unpacked archives from another
worker's, and removing "new" archives broke a concurrent install whose cache entry pointed at
one. So a fleet's nodes get a uv cache of their own (``UV_CACHE_DIR`` through sshd's ``SetEnv``,
as a node's profile would set it), removed with the fleet; the machine's cache is never pruned.
Nothing is lost: each node's copy of a pushed wheel is another local path, which uv unpacks
once per node in either cache."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path


@contextlib.contextmanager
def loopback_fleet(base: Path, count: int, first_address: int, remove=shutil.rmtree):
    """``count`` loopback sshd nodes (``envbuild.testbed.sshd``) for a fleet of environments
    under ``base / "envs"``, whose sessions use the uv cache ``base / "uv-cache"``; on exit the
    environments and that cache go (``remove``)."""
    from envbuild.testbed import sshd

    cache = base / "uv-cache"
    try:
        with sshd.ssh_nodes(count, first_address=first_address, session_env={"UV_CACHE_DIR": str(cache)}) as nodes:
            yield nodes
    finally:
        for folder in (base / "envs", cache):
            if folder.exists():
                remove(folder)
