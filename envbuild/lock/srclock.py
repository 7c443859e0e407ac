"""Lock what the recipe's source installs depend on: their declared requirements go to the
resolver in a file of their own (``src-<name>.in``), their git dependencies are pinned to SHAs.

Each source is read at its pinned commit in the git mirror (``envbuild.lock.srcdeps``); a git
dependency (``enrich @ git+https://github.com/saforem2/enrich``, no ref) is pinned to its
default branch as of the recipe's ``resolve_as_of`` and read in turn, so the lock holds the
whole closure and every install may run with ``--no-deps``. Without a mirror nothing is read:
the lock says so per source (``declared[].unread``) instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from envbuild import gitsrc
from envbuild.lock.schema import DeclaredDeps, LockedGit, normalize
from envbuild.lock.srcdeps import (METADATA_FILES, Declared, default_branch_as_of, read_build_requires,
                                   read_declared, split, tree_files)
from envbuild.recipes.schema import GitSource, Recipe

Progress = Callable[[str], None]
REQUIREMENTS_TXT = ("requirements.txt",)  # what requirements mode reads unless the source names its files


@dataclass
class SourceLock:
    """The resolver's extra inputs and the lock's records of what was read."""

    requirements: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    build: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)  # build requirements
    declared: list[DeclaredDeps] = field(default_factory=list)
    git: list[LockedGit] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


def dependency_mode(src: GitSource) -> str:
    """``metadata`` for pip-installed trees, ``none`` otherwise, unless the recipe says
    (``dependencies``, or ``requirements`` naming the files: requirements mode)."""
    if src.dependencies:
        return src.dependencies
    if src.requirements:
        return "requirements"
    return "metadata" if src.install in ("editable", "wheel") else "none"


def provided(recipe: Recipe) -> dict[str, str]:
    """``{normalized name: why it is not resolved}``: the recipe's own sources and the
    packages its image or module provides (PyPI's ``apex`` is another project)."""
    out = {normalize(s.name): f"provided by source {s.name}" for s in recipe.sources}
    out.update({normalize(p.name): "preinstalled" for p in recipe.packages if p.preinstalled})
    return out


def source_dependencies(recipe: Recipe, mirror_dir: Path | None, say: Progress,
                        tools: frozenset[str] = frozenset()) -> SourceLock:
    """Read every source's declared dependencies and lock its git dependencies (see module).

    A tree that pip builds (``metadata`` mode: the recipe's editable or wheel installs and
    every git dependency) builds with ``--no-build-isolation``, so what its build needs
    (``[build-system].requires``) is resolved too, less what the recipe provides and the build
    tooling (``tools``: normalized names the lock's tooling pins)."""
    out = SourceLock()
    given = provided(recipe)
    pending = [(s.name, s.url, s.sha, dependency_mode(s), tuple(s.requirements) or REQUIREMENTS_TXT)
               for s in recipe.sources]
    for src in recipe.sources:
        if dependency_mode(src) != "none":
            out.env.update(src.env)  # install-time variables (sklearn's brownout) for metadata builds
    while pending:
        name, url, sha, mode, req_files = pending.pop(0)
        if mode == "none":
            continue
        repo = gitsrc.mirror_path(url, mirror_dir)
        if repo is None or sha is None or not gitsrc.has_commit(repo, sha):
            why = ("no git mirror given (--git-mirror)" if mirror_dir is None else
                   f"no mirror of {url} under {mirror_dir}" if repo is None else
                   "no pinned commit" if sha is None else f"commit {sha[:12]} is not in the mirror")
            say(f"dependencies of {name}: not read ({why})")
            out.declared.append(DeclaredDeps(component=name, sha=sha, unread=f"not read: {why}"))
            continue
        files = tree_files(repo, sha, tuple(dict.fromkeys(METADATA_FILES + req_files)))
        declared = read_declared(files, mode, req_files)
        build = read_build_requires(files)
        build_lines = _build_requires(build, recipe.python, given, tools)
        index, gitdeps, dropped = split(declared.requirements, recipe.python)
        lines = []
        for req in index:
            reason = given.get(normalize(req.name))
            if reason:
                dropped.append(f"{req}: {reason}")
            else:
                lines.append(str(req))
        for dep in gitdeps:
            if reason := given.get(normalize(dep.name)):
                dropped.append(f"{dep.name} @ git+{dep.url}: {reason}")
                continue
            dropped.append(f"{dep.name} @ git+{dep.url}: a git dependency, pinned under git")
            known = next((g for g in out.git if normalize(g.name) == normalize(dep.name)), None)
            if known is not None:
                known.required_by.append(name)  # type: ignore[union-attr]
                continue
            pin = _lock_git_dependency(dep.name, dep.url, dep.ref, name, recipe.resolve_as_of,
                                       mirror_dir, say)
            out.git.append(pin)
            if pin.sha and pin.verified:
                pending.append((dep.name, dep.url, pin.sha, "metadata", REQUIREMENTS_TXT))
            else:
                out.declared.append(DeclaredDeps(component=dep.name, sha=pin.sha,
                                                 unread=pin.reason or "not read"))
        say(f"dependencies of {name} @ {sha[:12]}: {len(lines)} from {declared.origin or declared.unread}")
        out.declared.append(DeclaredDeps(component=name, sha=sha, origin=declared.origin,
                                         requirements=lines or None, dropped=dropped or None,
                                         unread=declared.unread, build_origin=build.origin,
                                         build_requires=build_lines or None))
        if lines:
            out.requirements.append((name, tuple(lines)))
        if build_lines:
            out.build.append((name, tuple(build_lines)))
    return out


def _build_requires(build: Declared, python: str, given: dict[str, str],
                    tools: frozenset[str]) -> list[str]:
    """The build requirement lines to resolve: those of the target's Python, less what the
    recipe provides and the build tooling (installed before, at the version the lock pins)."""
    index, _git, _skipped = split(build.requirements, python)
    return [str(r) for r in index if normalize(r.name) not in given and normalize(r.name) not in tools]


def _lock_git_dependency(name: str, url: str, ref: str | None, required_by: str,
                         as_of: str | None, mirror_dir: Path | None, say: Progress) -> LockedGit:
    """A git dependency pinned in the mirror: its ref, else its default branch as of ``as_of``."""
    repo = gitsrc.mirror_path(url, mirror_dir)
    shown_ref = ref or "HEAD"
    if repo is None:
        return LockedGit(name=name, url=url, ref=shown_ref, verified=False, required_by=[required_by],
                         reason=f"not verified: no mirror of {url} to pin it in")
    if ref:
        sha = gitsrc.resolve_ref(repo, ref)
        note = f"ref {ref} as {required_by} declares it"
    else:
        sha = default_branch_as_of(repo, as_of)
        note = (f"{required_by} declares no ref: the default branch"
                + (f" as of resolve_as_of {as_of}" if as_of else ""))
    date, subject = gitsrc.commit_info(repo, sha)
    say(f"git dependency {name} of {required_by}: {sha[:12]} ({date[:10]})")
    return LockedGit(name=name, url=url, ref=shown_ref, sha=sha, verified=True, commit_date=date,
                     subject=subject, note=note, required_by=[required_by])
