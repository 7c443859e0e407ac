"""One provision per prefix per node at a time: an exclusive lock for each (node, prefix) a
run will install into, held from before the probe until the run ends.

The locks are ``flock(2)`` locks on files under ``$ENVBUILD_LOCK_DIR`` (default
``/tmp/envbuild-<uid>/locks``, mode 0700), one per node address (user, host, port; the local
node by its real prefix path) and prefix. The kernel drops a lock when its process dies, so a
killed run (``kill -9``) leaves no stale lock behind, and a file left by it is only a file.
A second run that finds one held stops before it touches the node, naming the run that holds
it (EnvironmentProblem, exit 3).

Scope, said plainly: the lock is on this controller, for this user. Two controllers (or two
users) provisioning one node's prefix at once are not serialised by it.
"""

from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from envbuild.errors import EnvironmentProblem
from envbuild.fsio import sha256_text


def lock_dir() -> Path:
    return Path(os.environ.get("ENVBUILD_LOCK_DIR") or f"/tmp/envbuild-{os.getuid()}/locks")


def key(node, prefix: str) -> str:
    """The lock's name for ``prefix`` on ``node`` (an ``envbuild.connect.nodes.Node``)."""
    where = (f"local:{os.path.realpath(prefix)}" if node.is_local
             else f"{node.user or ''}@{node.host}:{node.port or 22}:{prefix.rstrip('/') or '/'}")
    return sha256_text(where)[:32]


@contextmanager
def held(nodes_prefixes: list[tuple[object, str]], run_id: str) -> Iterator[None]:
    """Hold the lock of every (node, prefix) for the block; EnvironmentProblem when one is
    held by another run (every lock taken so far is released)."""
    folder = lock_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    files = []
    try:
        for node, prefix in nodes_prefixes:
            path = folder / f"{key(node, prefix)}.lock"
            f = open(path, "a+")  # noqa: SIM115 - held open for the block
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.seek(0)
                owner = f.read().strip()
                f.close()
                try:
                    who = json.loads(owner)
                    by = f"run {who.get('run')} (pid {who.get('pid')})"
                except ValueError:
                    by = "another run"
                raise EnvironmentProblem(f"{node.name}: {prefix} is being provisioned by {by}",
                                         hint="wait for that run to end (one provision of a prefix at a time), "
                                              "or provision another --prefix") from None
            f.seek(0)
            f.truncate()
            f.write(json.dumps({"run": run_id, "pid": os.getpid(), "node": node.name, "prefix": prefix}))
            f.flush()
            files.append(f)
        yield
    finally:
        for f in files:
            fcntl.flock(f, fcntl.LOCK_UN)
            f.close()
