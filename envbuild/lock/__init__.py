"""Lockfiles: every package and git pin of a recipe, resolved for one target.

``envbuild lock RECIPE --target TARGET`` writes ``LOCKDIR/<recipe>/<target>.lock``, LOCKDIR being
``--lockdir``, else ``$ENVBUILD_LOCKDIR``, else the locks shipped in the package
(``envbuild/lockfiles``, ``default_lockdir``); ``--check`` verifies that an existing lock still
satisfies the recipe without resolving.

Example::

    from envbuild.lock import make_lock, lock_path, check_lock_file
    lock = make_lock(load_recipe("cpu-reference"), load_target("local"))
"""

from envbuild.catalog import digest
from envbuild.lock.check import lock_problems
from envbuild.lock.make import (SHIPPED_LOCKDIR, cache_dir, check_lock_file, default_lockdir, ensure_target,
                                git_mirror_dir, locate_lock, lock_path, make_lock, write_lock)
from envbuild.lock.schema import LOCK_SCHEMA, Dist, Lock, LockedGit, LockedPackage
from envbuild.lock.serialize import dump_lock, lock_digest, parse_lock, read_lock, regenerate_command

__all__ = [
    "LOCK_SCHEMA", "SHIPPED_LOCKDIR", "Dist", "Lock", "LockedGit", "LockedPackage", "cache_dir",
    "check_lock_file", "default_lockdir", "digest", "dump_lock", "ensure_target", "git_mirror_dir",
    "locate_lock", "lock_digest", "lock_path", "lock_problems",
    "make_lock", "parse_lock", "read_lock", "regenerate_command", "write_lock",
]
