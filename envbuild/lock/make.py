"""Make and write a lock for one recipe on one target (where locks live:
``envbuild.lock.location``; checking one: ``envbuild.lock.check``).

``make_lock`` is the whole resolution: packages through uv for the target's Python and
platform, git components through a mirror (or an ``ls-remote`` that fails fast). The result
is a pure function of the recipe, the target, the indexes as of ``resolve_as_of`` and the
mirror, so two runs give the same bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from envbuild import __version__
from envbuild.catalog import digest
from envbuild.errors import InputError
from envbuild.fsio import write_atomic
from envbuild.lock.gitpins import lock_git
from envbuild.lock.location import cache_dir, writable_lock
from envbuild.lock.packages import Sorted, locked, sort_packages
from envbuild.lock.schema import Lock, LockedPackage, Named, PlatformInfo, normalize
from envbuild.lock.serialize import dump_lock, regenerate_command
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
              wheelhouse: Path | None = None, progress: Progress | None = None) -> Lock:
    """Resolve every package and git pin of ``recipe`` for ``target``."""
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
                    build_requirements=tuple(deps.build))
    say(f"resolving {len(req.requirements)} package(s) with uv for Python {recipe.python} "
        f"on {pyplat}" + (f" as of {recipe.resolve_as_of}" if recipe.resolve_as_of else ""))
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


def write_lock(recipe: Recipe, target: Target, path: Path, *, git_mirror: Path | None = None,
               wheelhouse: Path | None = None, progress: Progress | None = None) -> tuple[Lock, bool]:
    """Make the lock and write it atomically; returns (lock, whether the file changed). A path
    inside envbuild's package is refused before anything is resolved (``writable_lock``)."""
    path = writable_lock(path)
    lock = make_lock(recipe, target, git_mirror=git_mirror, wheelhouse=wheelhouse, progress=progress)
    command = regenerate_command(recipe.name, target.name, git_mirror=git_mirror is not None,
                                 wheelhouse=wheelhouse is not None)
    text = dump_lock(lock, command)
    old = path.read_text() if path.is_file() else None
    if old != text:
        write_atomic(path, text)
    return lock, old != text
