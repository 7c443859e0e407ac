"""``envbuild lock --check``: does a lockfile still satisfy its recipe? Pure, no resolution.

``lock_problems`` lists every problem at once (one line each): recipe or target changed
(digest), a package or git pin the recipe names that the lock lacks or pins differently, a
locked top-level entry the recipe dropped, python or resolve date changed.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Callable

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from envbuild.catalog import digest, given_as
from envbuild.errors import CheckFailed
from envbuild.lock.location import lock_option
from envbuild.lock.schema import Lock, LockedPackage, normalize
from envbuild.lock.serialize import read_lock, regenerate_command
from envbuild.lock.tooling import tooling
from envbuild.recipes.schema import Package, Recipe
from envbuild.targets.schema import Target

Progress = Callable[[str], None]


def _version_problem(pkg: Package, lp: LockedPackage) -> str | None:
    want = pkg.version.strip()
    if pkg.preinstalled or lp.source == "preinstalled":
        if pkg.preinstalled != (lp.source == "preinstalled"):
            state = "preinstalled" if pkg.preinstalled else "installed by envbuild"
            return f"package {pkg.name}: the recipe now says {state}, the lock does not"
        return None if want == lp.version else f"package {pkg.name}: recipe says {want}, lock has {lp.version}"
    if want in ("", "*"):
        return None
    try:
        have = Version(lp.version)
    except InvalidVersion:
        return f"package {pkg.name}: locked version {lp.version!r} is not a version"
    try:
        exact = Version(want)
    except InvalidVersion:
        exact = None
    if exact is not None:
        if exact.local is not None:
            ok = have == exact
        else:
            ok = have.public == exact.public and (pkg.cuda in (None, "auto") or not pkg.index
                                                  or have.local == pkg.cuda)
        return None if ok else f"package {pkg.name}: recipe pins {want}" + (
            f" ({pkg.cuda})" if pkg.cuda and pkg.cuda != "auto" else "") + f", lock has {lp.version}"
    try:
        spec = SpecifierSet(want)
    except InvalidSpecifier:
        return f"package {pkg.name}: recipe version {want!r} is neither a version nor a specifier"
    if not spec.contains(have.public, prereleases=True):
        return f"package {pkg.name}: lock has {lp.version}, outside the recipe's {want}"
    return None


def lock_problems(lock: Lock, recipe: Recipe, target: Target) -> list[str]:
    """Every way ``lock`` fails to satisfy ``recipe`` on ``target``; [] when it is up to date."""
    out: list[str] = []
    if lock.recipe.name != recipe.name:
        out.append(f"lock is for recipe {lock.recipe.name!r}, not {recipe.name!r}")
    if lock.target.name != target.name:
        out.append(f"lock is for target {lock.target.name!r}, not {target.name!r}")
    if target.name not in recipe.targets:
        out.append(f"target {target.name!r} is no longer in the recipe's targets ({', '.join(recipe.targets)})")
    if lock.recipe.digest != digest(recipe):
        out.append(f"recipe {recipe.name} changed since the lock was made "
                   f"(digest {lock.recipe.digest[:12]} -> {digest(recipe)[:12]})")
    if lock.target.digest != digest(target):
        out.append(f"target {target.name} changed since the lock was made "
                   f"(digest {lock.target.digest[:12]} -> {digest(target)[:12]})")
    if lock.python != recipe.python:
        out.append(f"recipe python is {recipe.python}, lock resolved for {lock.python}")
    if lock.resolve_as_of != recipe.resolve_as_of:
        out.append(f"recipe resolve_as_of is {recipe.resolve_as_of}, lock used {lock.resolve_as_of}")
    names = {normalize(p.name) for p in recipe.packages}
    for pkg in recipe.packages:
        lp = lock.package(pkg.name)
        if lp is None:
            out.append(f"package {pkg.name} is in the recipe but missing from the lock")
        elif problem := _version_problem(pkg, lp):
            out.append(problem)
    for lp in lock.packages:
        if "recipe" in lp.required_by and normalize(lp.name) not in names:
            out.append(f"package {lp.name} is locked as a recipe package but the recipe no longer names it")
    out += _tooling_problems(lock, recipe)
    for src in recipe.sources:
        lg = lock.git_pin(src.name)
        if lg is None:
            out.append(f"git {src.name} is in the recipe but missing from the lock")
            continue
        if lg.url != src.url:
            out.append(f"git {src.name}: recipe url {src.url}, lock has {lg.url}")
        if lg.ref != src.ref:
            out.append(f"git {src.name}: recipe ref {src.ref!r}, lock has {lg.ref!r}")
        if src.sha and lg.sha != src.sha:
            out.append(f"git {src.name}: recipe pins {src.sha}, lock has {lg.sha}")
    sources = {s.name for s in recipe.sources}
    pinned = sources | {lg.name for lg in lock.git if lg.required_by}
    for lg in lock.git:
        if lg.required_by:  # a git dependency of a source install (envbuild.lock.srclock)
            if not set(lg.required_by) & pinned:
                out.append(f"git {lg.name} is locked for {', '.join(lg.required_by)}, which the "
                           "recipe no longer names")
        elif lg.name not in sources:
            out.append(f"git {lg.name} is locked but the recipe no longer names it")
    return out


def _tooling_problems(lock: Lock, recipe: Recipe) -> list[str]:
    """The build tooling the plan installs must be locked, each at a version its spec admits."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    out = []
    for tool in tooling(recipe):
        entry = next((t for t in lock.tooling if normalize(t.name) == normalize(tool.name)), None)
        if entry is None:
            out.append(f"tooling {tool.requirement} is not in the lock")
        elif Version(entry.version) not in SpecifierSet(tool.spec):
            out.append(f"tooling {tool.name}: lock has {entry.version}, the plan needs {tool.spec}")
    wanted = {normalize(t.name) for t in tooling(recipe)}
    out += [f"tooling {t.name} is locked but no longer needed" for t in lock.tooling
            if normalize(t.name) not in wanted]
    return out


def check_lock_file(path: Path, recipe: Recipe, target: Target, *, git_mirror: Path | None = None,
                    progress: Progress | None = None) -> Lock:
    """Read the lock at ``path``; CheckFailed listing every problem when it is stale.

    With ``git_mirror`` every git pin is re-verified there too (``envbuild.lock.gitcheck``):
    a commit gone from its repository, a required ancestor that no longer holds, or a ref that
    no longer contains the pin is a problem; a branch that moved on past the pin, or a
    repository the mirror lacks, is a notice given to ``progress``.
    """
    # the command that regenerates this lock as given: the recipe and target as typed (a path for
    # one's own), where the lock lies, and the mirror the check read (issue 49)
    command = regenerate_command(given_as(recipe), given_as(target),
                                 where=lock_option(path, recipe.name, target.name))
    if git_mirror is not None:
        command += f" --git-mirror {shlex.quote(str(git_mirror))}"
    if not path.is_file():
        raise CheckFailed(f"no lockfile at {path}", hint=f"create it: {command}")
    lock = read_lock(path)
    problems = lock_problems(lock, recipe, target)
    if git_mirror is not None:
        from envbuild.lock.gitcheck import recheck_git

        git_problems, notices = recheck_git(lock, recipe, git_mirror)
        problems += git_problems
        for note in notices:
            (progress or (lambda _m: None))(note)
    if problems:
        raise CheckFailed(f"{path} is out of date:\n  - " + "\n  - ".join(problems),
                          hint=f"regenerate it: {command}")
    return lock
