"""Where locks live: the shipped ones, the folder ``envbuild lock`` writes to, one lock's
path, and the caches and git mirror that locking reads. Light to import: a command that only
reads a lock (a no-op provision) never loads the resolvers of ``envbuild.lock.make``."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from envbuild.errors import InputError
from envbuild.names import NAME_RULE, is_name
from envbuild.rundir import envbuild_home
from envbuild.shipped import INSTALLED, LOCKFILES, PACKAGE

SHIPPED_LOCKDIR = LOCKFILES  # lockfiles/ of the checkout, envbuild/lockfiles in the wheel (envbuild.shipped)
LOCKDIR_ENV = "ENVBUILD_LOCKDIR"


def default_lockdir(option: str | Path | None = None) -> Path:
    """The folder ``envbuild lock`` writes to and provision looks in first: ``--lockdir``, else
    ``$ENVBUILD_LOCKDIR``, else, from a source checkout, its ``lockfiles/`` (the shipped locks,
    reviewed and committed), and from an installed envbuild ``$ENVBUILD_HOME/locks``: never the
    installed package, where the next install or upgrade would drop the lock
    (``envbuild.shipped.INSTALLED``; ``writable_lock`` refuses a path there).

    Never the working directory: the same command finds the same lock from any folder.
    """
    value = option or os.environ.get(LOCKDIR_ENV)
    if value:
        return Path(value)
    return envbuild_home() / "locks" if INSTALLED else SHIPPED_LOCKDIR


def writable_lock(path: str | Path) -> Path:
    """``path``, where a lock may be written: anywhere but inside envbuild's own package folder
    (an installed envbuild's site-packages copy, shipped locks included; in a checkout the
    shipped locks lie outside it, in ``lockfiles/``). InputError, before anything is resolved,
    for a path inside."""
    path = Path(path)
    if path.resolve().is_relative_to(PACKAGE):
        where = "the installed envbuild package" if INSTALLED else "envbuild's package folder"
        raise InputError(f"{path} lies inside {where} ({PACKAGE}): a lock is not written there"
                         + (" (the next install or upgrade of envbuild would drop it)" if INSTALLED else ""),
                         hint=f"lock into a folder of your own with --lockdir DIR (then ${LOCKDIR_ENV}=DIR "
                              "or provision --lock FILE), or give neither --lockdir nor -o to write under "
                              + ("$ENVBUILD_HOME/locks" if INSTALLED else f"{SHIPPED_LOCKDIR}"))
    return path


def locate_lock(recipe: str, target: str, option: str | Path | None = None) -> Path:
    """Where the lock of ``recipe`` x ``target`` is: in ``default_lockdir(option)`` if there,
    else among the shipped locks if there (a shipped recipe keeps its shipped lock when another
    folder is chosen for one's own locks), else the (missing) path in ``default_lockdir(option)``."""
    chosen = lock_path(recipe, target, default_lockdir(option))
    shipped = lock_path(recipe, target, SHIPPED_LOCKDIR)
    return chosen if chosen.is_file() or not shipped.is_file() else shipped


def cache_dir() -> Path:
    """Where the resolver's uv cache lives: $ENVBUILD_CACHE_DIR/resolve-uv, else
    ~/.cache/envbuild/resolve-uv. Not ~/.cache/envbuild/uv: that folder holds the uv binaries
    provision pushes to a node (``envbuild.plan.build.uv_dest``), and on a node that is also the
    controller ``uv cache prune`` of this cache would delete them."""
    root = os.environ.get("ENVBUILD_CACHE_DIR") or Path.home() / ".cache" / "envbuild"
    return Path(root) / "resolve-uv"


def git_mirror_dir(option: str | Path | None) -> Path | None:
    """The git mirror from ``--git-mirror`` or ``ENVBUILD_GIT_MIRROR``; must exist if given."""
    value = option or os.environ.get("ENVBUILD_GIT_MIRROR")
    if not value:
        return None
    path = Path(value)
    if not path.is_dir():
        raise InputError(f"git mirror {path} is not a directory",
                         hint="pass the folder that holds OWNER/NAME(.git) repositories")
    return path


def lock_path(recipe: str, target: str, lockdir: str | Path | None = None) -> Path:
    """``LOCKDIR/<recipe>/<target>.lock``; LOCKDIR is ``lockdir`` or else ``default_lockdir()``.

    Both names must be names (``envbuild.names.NAME_RE``): ``../x`` never leaves LOCKDIR.
    """
    for what, name in (("recipe", recipe), ("target", target)):
        if not is_name(name):
            raise InputError(f"{name!r} is not a valid {what} name ({NAME_RULE}); "
                             "it would not stay inside the lockfile folder",
                             hint=f"give the {what} a name such as 'my-{what}' in its YAML file")
    return Path(lockdir or default_lockdir()) / recipe / f"{target}.lock"


def lock_option(path: str | Path, recipe: str, target: str) -> str:
    """The option of ``envbuild lock`` that writes the lock at ``path`` (of ``recipe`` x
    ``target``, their names): none where it writes or finds it by default (the default lockdir,
    the shipped locks), ``--lockdir DIR`` for DIR/<recipe>/<target>.lock, else ``-o FILE``."""
    path = Path(path)
    if path in (lock_path(recipe, target, default_lockdir()), lock_path(recipe, target, SHIPPED_LOCKDIR)):
        return ""
    if path.name == f"{target}.lock" and path.parent.name == recipe:
        return f"--lockdir {shlex.quote(str(path.parent.parent))}"
    return f"-o {shlex.quote(str(path))}"
