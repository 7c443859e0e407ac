"""``envbuild lock --check --git-mirror DIR``: re-verify every git pin of a lock in a mirror.

``lock_problems`` compares a lock with its recipe (pure); this module asks the mirror whether
the pins still hold there, without resolving anything anew:

* the locked commit still exists in its repository (a force-push or a deleted fork loses it);
* every required ancestor (the recipe's ``requires_ancestors``) is still an ancestor of it;
* the ref: a branch or tag past the pin whose history still contains it is a *notice* (the
  pin is still on it, "N commits ahead"; ``lock`` accepts the same ref, see
  ``gitpins.lock_from_mirror``), a branch or tag that no longer contains the pin is a
  *problem*, a ref gone from the repository is a notice when the commit is still there.

A repository absent from the mirror cannot be re-verified: that is a notice, never a pass
in disguise (the notice says so). A pin the lock already records unverified stays a notice.

Example::

    problems, notices = recheck_git(read_lock(path), load_recipe("alpa-megatron"), Path("/srv/mirror"))
"""

from __future__ import annotations

from pathlib import Path

from envbuild import gitsrc
from envbuild.errors import EnvironmentProblem, InputError
from envbuild.lock.schema import Lock, LockedGit
from envbuild.recipes.schema import Recipe


def _ahead(repo: Path, old: str, new: str) -> int | None:
    proc = gitsrc.run_git(["rev-list", "--count", f"{old}..{new}"], cwd=repo, check=False)
    return int(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip().isdigit() else None


def _is_tag(repo: Path, ref: str) -> bool:
    proc = gitsrc.run_git(["rev-parse", "--verify", "--quiet", f"refs/tags/{ref}"], cwd=repo, check=False)
    return proc.returncode == 0


def recheck_pin(lg: LockedGit, required: list[str], repo: Path) -> tuple[list[str], list[str]]:
    """``(problems, notices)`` for one locked pin against the mirror repository ``repo``."""
    problems: list[str] = []
    notices: list[str] = []
    name = f"git {lg.name}"
    if lg.sha is None:
        return [], [f"{name}: the lock has no commit ({lg.reason or 'unverified'}); nothing to re-verify"]
    if not gitsrc.has_commit(repo, lg.sha):
        if lg.verified:
            problems.append(f"{name}: the locked commit {lg.sha} is no longer in {lg.url} "
                            f"(mirror {repo}): rewritten history or a deleted branch")
        else:
            notices.append(f"{name}: {lg.sha[:12]} is still not in the mirror {repo} "
                           f"(the lock records it unverified)")
        return problems, notices
    for anc in required:
        if not gitsrc.is_ancestor(repo, anc, lg.sha):
            where = "not an ancestor of" if gitsrc.has_commit(repo, anc) else "absent, so not an ancestor of"
            problems.append(f"{name}: required ancestor {anc} is {where} the locked {lg.sha}")
    if gitsrc.SHA_RE.match(lg.ref):
        if lg.ref != lg.sha:
            problems.append(f"{name}: the ref is the commit {lg.ref}, the lock has {lg.sha}")
        return problems, notices
    try:
        head = gitsrc.resolve_ref(repo, lg.ref)
    except InputError:
        notices.append(f"{name}: ref {lg.ref!r} is gone from {lg.url}; the pinned commit "
                       f"{lg.sha[:12]} is still there")
        head = None
    if head is not None and head != lg.sha:
        kind = "tag" if _is_tag(repo, lg.ref) else "branch"
        if gitsrc.is_ancestor(repo, lg.sha, head):  # the rule `lock` applies (gitpins.lock_from_mirror)
            n = _ahead(repo, lg.sha, head)
            ahead = f" ({n} commits ahead)" if n is not None else ""
            moved = ("has moved from the pin" if kind == "branch" else "points past the pin")
            notices.append(f"{name}: {kind} {lg.ref} {moved} {lg.sha[:12]} to {head[:12]}{ahead}"
                           "; the pin is still on it")
        else:
            problems.append(f"{name}: {kind} {lg.ref} now points at {head[:12]}, which does not "
                            f"contain the pinned {lg.sha[:12]} (moved tag, force-push or rebase)")
    if not lg.verified and not problems:
        notices.append(f"{name}: the lock records it unverified ({lg.reason}); the mirror now "
                       "confirms it: regenerate the lock with --git-mirror to record that")
    return problems, notices


def recheck_git(lock: Lock, recipe: Recipe, mirror_dir: str | Path) -> tuple[list[str], list[str]]:
    """``(problems, notices)`` for every git pin of ``lock`` against the mirror folder."""
    problems: list[str] = []
    notices: list[str] = []
    for lg in lock.git:
        src = recipe.source(lg.name)
        required = list(src.requires_ancestors) if src is not None else list(lg.ancestors_checked)
        repo = gitsrc.mirror_path(lg.url, mirror_dir)
        if repo is None:
            notices.append(f"git {lg.name}: not re-verified: no mirror of {lg.url} under {mirror_dir}")
            continue
        try:
            p, n = recheck_pin(lg, required, repo)
        except EnvironmentProblem as exc:  # a damaged mirror: say so, never pass silently
            p, n = [f"git {lg.name}: cannot read the mirror {repo}: {exc.message}"], []
        problems += p
        notices += n
    return problems, notices
