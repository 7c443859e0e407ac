"""Make and write a lock for one recipe on one target (where locks live:
``envbuild.lock.location``; checking one: ``envbuild.lock.check``).

``make_lock`` is the whole resolution: packages through uv for the target's Python and
platform, git components through a mirror (or an ``ls-remote`` that fails fast). The result
is a pure function of the recipe, the target, the indexes as of ``resolve_as_of`` and the
mirror, so two runs give the same bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

from envbuild import __version__
from envbuild.catalog import digest
from envbuild.errors import EnvbuildError, InputError
from envbuild.fsio import write_atomic
from envbuild.lock.gitpins import lock_git
from envbuild.lock.keep import PinChange, Upgrade, pin_changes, preferences
from envbuild.lock.location import cache_dir, writable_lock
from envbuild.lock.packages import Sorted, locked, sort_packages
from envbuild.lock.schema import Lock, LockedPackage, Named, PlatformInfo, normalize
from envbuild.lock.serialize import dump_lock, read_lock, regenerate_command
from envbuild.lock.srclock import source_dependencies
from envbuild.lock.tooling import tooling
from envbuild.lock.uvresolve import UvRequest, platform_tags, python_platform, resolve
from envbuild.recipes.schema import Recipe
from envbuild.targets.schema import Target

Progress = Callable[[str], None]
def ensure_target(recipe: Recipe, target: Target) -> None:
    """InputError unless the recipe lists ``target`` among its targets."""
    if target.name not in recipe.targets:
        raise InputError(f"recipe {recipe.name} is not made for target {target.name!r}",
                         hint=f"its targets are: {', '.join(recipe.targets) or '(none)'}")


def make_lock(recipe: Recipe, target: Target, *, git_mirror: Path | None = None,
              wheelhouse: Path | None = None, progress: Progress | None = None,
              keep: Mapping[str, str] | None = None) -> Lock:
    """Resolve every package and git pin of ``recipe`` for ``target``. ``keep``: versions uv
    keeps where the requirements allow (an existing lock's pins: ``envbuild.lock.keep``)."""
    say = progress or (lambda _msg: None)
    ensure_target(recipe, target)
    if wheelhouse is not None and not wheelhouse.is_dir():
        raise InputError(f"wheelhouse {wheelhouse} is not a directory", hint="pass a folder of wheels")
    pyplat = python_platform(target.platform.arch, target.platform.glibc)
    git = [lock_git(src, git_mirror, say) for src in recipe.sources]  # cheap checks first
    sorted_ = sort_packages(recipe, target, wheelhouse, say)
    tool_names = frozenset(normalize(t.name) for t in tooling(recipe))
    deps = source_dependencies(recipe, git_mirror, say, tool_names)  # what the source installs declare
    req = UvRequest(requirements=tuple(sorted_.requirements), python=recipe.python,
                    python_platform=pyplat, exclude_newer=recipe.resolve_as_of,
                    excludes=tuple(sorted_.excludes), find_links=tuple(sorted_.find_links),
                    extra_indexes=tuple(sorted_.extra_indexes),
                    no_build_metadata=tuple(sorted_.no_build),
                    source_requirements=tuple(deps.requirements),
                    build_requirements=tuple(deps.build),
                    preferences=tuple(sorted((keep or {}).items())))
    say(f"resolving {len(req.requirements)} package(s) with uv for Python {recipe.python} "
        f"on {pyplat}" + (f" as of {recipe.resolve_as_of}" if recipe.resolve_as_of else "")
        + (f", keeping the existing lock's {len(keep)} pin(s) where the recipe allows" if keep else ""))
    prefer = "file://" + str(wheelhouse.resolve()) if wheelhouse else None
    resolved = resolve(req, cache_dir(), prefer_prefix=prefer, env={**deps.env, **sorted_.env})
    say(f"resolved {len(resolved)} package(s); {len(sorted_.given)} recorded as given")
    given = sorted(sorted_.given, key=lambda p: p.source != "preinstalled")  # stable sort
    packages = given + [locked(r, sorted_, wheelhouse) for r in resolved]
    tools = lock_tooling(recipe, pyplat, wheelhouse, say)
    return Lock(recipe=Named(name=recipe.name, digest=digest(recipe)),
                target=Named(name=target.name, digest=digest(target)),
                python=recipe.python,
                platform=PlatformInfo(python_platform=pyplat, tags=platform_tags(recipe.python, pyplat)),
                resolve_as_of=recipe.resolve_as_of, envbuild_version=__version__,
                packages=packages, tooling=tools, git=git + deps.git,
                declared=deps.declared or None)


def lock_tooling(recipe: Recipe, pyplat: str, wheelhouse: Path | None,
                 say: Progress) -> list[LockedPackage]:
    """pip/setuptools/wheel as the plan installs them (``envbuild.lock.tooling.tooling``),
    resolved on their own (no dependencies) with a hash each."""
    tools = tooling(recipe)
    if not tools:
        return []
    req = UvRequest(requirements=tuple(t.requirement for t in tools), python=recipe.python,
                    python_platform=pyplat,
                    find_links=(str(wheelhouse.resolve()),) if wheelhouse else ())
    say(f"resolving the build tooling: {', '.join(t.requirement for t in tools)}")
    prefer = "file://" + str(wheelhouse.resolve()) if wheelhouse else None
    resolved = resolve(req, cache_dir(), prefer_prefix=prefer)
    wanted = {normalize(t.name) for t in tools}
    empty = Sorted(requested={normalize(t.name): t.spec for t in tools})
    return [locked(r, empty, wheelhouse) for r in resolved if normalize(r.name) in wanted]


def existing_lock(path: Path, recipe: Recipe, target: Target, say: Progress) -> Lock | None:
    """The lock already at ``path`` for this recipe and target, whose pins a re-lock keeps;
    None (said) when there is none, it is not readable or it is another pair's."""
    if not path.is_file():
        return None
    try:
        old = read_lock(path)
    except EnvbuildError as exc:
        say(f"the lock at {path} is not readable ({exc.message}): resolving without its pins")
        return None
    if (old.recipe.name, old.target.name) != (recipe.name, target.name):
        say(f"the lock at {path} is {old.recipe.name}/{old.target.name}'s: resolving without its pins")
        return None
    return old


def write_lock(recipe: Recipe, target: Target, path: Path, *, git_mirror: Path | None = None,
               wheelhouse: Path | None = None, progress: Progress | None = None,
               upgrade: Upgrade = Upgrade()) -> tuple[Lock, bool, list[PinChange]]:
    """Make the lock and write it atomically; returns (lock, whether the file changed, the pins
    that moved with why). The existing lock's pins are kept where the recipe allows, less what
    ``upgrade`` names (uv's re-lock semantics). A path inside envbuild's package is refused
    before anything is resolved (``writable_lock``)."""
    path = writable_lock(path)
    say = progress or (lambda _msg: None)
    old = existing_lock(path, recipe, target, say)
    lock = make_lock(recipe, target, git_mirror=git_mirror, wheelhouse=wheelhouse, progress=progress,
                     keep=preferences(old, upgrade))
    command = regenerate_command(recipe.name, target.name, git_mirror=git_mirror is not None,
                                 wheelhouse=wheelhouse is not None)
    text = dump_lock(lock, command)
    before = path.read_text() if path.is_file() else None
    if before != text:
        write_atomic(path, text)
    return lock, before != text, pin_changes(old, lock, upgrade)
