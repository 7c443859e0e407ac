"""Lockfiles: every package and git pin of a recipe, resolved for one target.

``envbuild lock RECIPE --target TARGET`` writes ``LOCKDIR/<recipe>/<target>.lock``, LOCKDIR being
``--lockdir``, else ``$ENVBUILD_LOCKDIR``, else a checkout's ``lockfiles/`` (the shipped locks) or,
for an installed envbuild, ``$ENVBUILD_HOME/locks`` (``default_lockdir``; never into the installed
package: ``writable_lock``); ``--check`` verifies that the lock provision would take still
satisfies the recipe without resolving.

Example::

    from envbuild.lock import make_lock, lock_path, check_lock_file
    lock = make_lock(load_recipe("cpu-reference"), load_target("local"))
"""

# The names below are loaded from their modules on first use (PEP 562), so importing one
# submodule (``envbuild.lock.schema`` for the lock model) does not import the resolvers, the
# index client and the git pinning that making a lock needs: a no-op provision reads a lock and
# never makes one.
_FROM = {
    "digest": "envbuild.catalog",
    **dict.fromkeys(("check_lock_file", "lock_problems"), "envbuild.lock.check"),
    **dict.fromkeys(("SHIPPED_LOCKDIR", "cache_dir", "default_lockdir", "git_mirror_dir", "locate_lock", "lock_path",
                     "writable_lock"), "envbuild.lock.location"),
    **dict.fromkeys(("ensure_target", "make_lock", "write_lock"), "envbuild.lock.make"),
    **dict.fromkeys(("LOCK_SCHEMA", "Dist", "Lock", "LockedGit", "LockedPackage"), "envbuild.lock.schema"),
    **dict.fromkeys(("dump_lock", "lock_digest", "parse_lock", "read_lock", "regenerate_command"),
                    "envbuild.lock.serialize"),
}

__all__ = sorted(_FROM)


def __getattr__(name: str):
    if name not in _FROM:
        raise AttributeError(f"module 'envbuild.lock' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_FROM[name]), name)
    globals()[name] = value
    return value
