"""The lock a provision installs: the one given or shipped, refused when stale, made now only
for a recipe of one's own."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from envbuild.errors import CheckFailed
from envbuild.inputs import find_lock, lock_source
from envbuild.lock.location import LOCKDIR_ENV, SHIPPED_LOCKDIR, default_lockdir
from envbuild.lock.serialize import dump_lock, regenerate_command
from envbuild.provision.options import ProvisionOptions
from envbuild.recipes import is_shipped
from envbuild.shipped import INSTALLED


def existing_lock(opts: ProvisionOptions, recipe, target):
    """(lock, path, text) of --lock, else the lockdir's or the shipped lock
    (``envbuild.inputs.lock_source``); None when there is none. A stale lock is refused (CheckFailed)."""
    lock = find_lock(recipe, target, opts.lock)
    if lock is None:
        return None
    path = lock_source(recipe, target, opts.lock)
    return lock, str(path), path.read_text()


def take_lock(opts: ProvisionOptions, recipe, target, say: Callable[[str], None], found=None):
    """(lock, path, text): --lock, else the lockdir's or the shipped lock, else lock now.
    ``found`` is ``existing_lock``'s answer when the caller already asked.

    A lock that no longer satisfies the recipe is refused (CheckFailed, exit 1, with the
    command that re-locks), as ``plan`` refuses it; with ``--locked`` a missing lock is too,
    and so is a shipped recipe's missing lock (its lock ships with it: resolving it anew over
    the network would install something else than what was tested). Only a recipe of one's own
    without a lock is locked now, announced (docs/recipes.md, "Lockfiles").
    """
    found = found if found is not None else existing_lock(opts, recipe, target)
    if found is not None:
        return found
    path = lock_source(recipe, target, opts.lock)
    if is_shipped(recipe):
        raise CheckFailed(f"no lockfile for the shipped recipe {recipe.name} on {target.name}: not in "
                          f"the lock folder ({default_lockdir(None)}; --lockdir or ${LOCKDIR_ENV} name "
                          f"another) nor among the shipped locks ({SHIPPED_LOCKDIR})",
                          hint=("this envbuild's package lacks its locks (reinstall envbuild)" if INSTALLED
                                else "the checkout lacks its lockfiles/ folder (git checkout -- lockfiles)")
                               + f", or lock it yourself: {regenerate_command(recipe.name, target.name)} "
                               f"--lockdir DIR, then {LOCKDIR_ENV}=DIR or --lock FILE")
    if opts.locked:
        raise CheckFailed(f"no lockfile at {path} and --locked was given",
                          hint=f"create it first: {regenerate_command(recipe.name, target.name)}")
    say(f"no lockfile at {path}: locking {recipe.name} for {target.name} now")
    from envbuild.lock.make import make_lock  # the resolvers: only when locking now

    lock = make_lock(recipe, target, git_mirror=Path(opts.git_mirror) if opts.git_mirror else None,
                     wheelhouse=Path(opts.wheelhouse) if opts.wheelhouse else None, progress=say)
    return lock, None, dump_lock(lock, regenerate_command(recipe.name, target.name))
