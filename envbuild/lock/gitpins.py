"""Lock the recipe's git components: resolve each ref, compare with the pinned SHA, check ancestry.

With a mirror (``--git-mirror DIR`` or ``ENVBUILD_GIT_MIRROR``) every check is real and a
failed one is an error. A repository absent from the mirror is never fetched from GitHub:
it is recorded unverified. Without a mirror, ``git ls-remote`` is tried under a short
timeout; when it fails the recipe's SHA is recorded as ``verified: false`` with the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from envbuild import gitsrc
from envbuild.errors import CheckFailed, EnvironmentProblem, InputError
from envbuild.lock.schema import LockedGit
from envbuild.recipes.schema import GitSource

Progress = Callable[[str], None]


def _unverified(src: GitSource, reason: str) -> LockedGit:
    return LockedGit(name=src.name, url=src.url, ref=src.ref, sha=src.sha, verified=False,
                     reason=f"not verified: {reason}")


def lock_from_mirror(src: GitSource, repo: Path, say: Progress = lambda _m: None) -> LockedGit:
    """Resolve and check one component against a local mirror; failures raise CheckFailed.

    The recipe's SHA must be the ref's head, or an ancestor of it (a branch that moved on
    since the pin); any other SHA is an error naming both. A mirror that lacks the ref cannot
    tell whether the pin is on it: the pin is recorded unverified (with the commit's date and
    its required ancestors checked when the commit is there).
    """
    try:
        sha = gitsrc.resolve_ref(repo, src.ref)
    except InputError:
        if src.sha is None:
            raise CheckFailed(f"{src.name}: ref {src.ref!r} is not in the mirror {repo}",
                              hint="update the mirror or fix the ref") from None
        if not gitsrc.has_commit(repo, src.sha):
            say(f"git {src.name}: neither {src.ref} nor {src.sha[:12]} is in {repo}; recorded unverified")
            return _unverified(src, f"neither ref {src.ref} nor the pinned commit is in the mirror of "
                                    f"{src.url} (an incomplete mirror neither confirms nor refutes it)")
        # the commit is there but the ref is not: a commit of another branch would pass for
        # the pin, so the pin is checked (ancestors) but recorded unverified, saying why
        sha = src.sha
        note = None
        unsure = (f"ref {src.ref} is not in the mirror of {src.url}; the pinned commit is, but whether "
                  f"it is on {src.ref} cannot be told without the ref")
        say(f"git {src.name}: {src.ref} is not in {repo}; {src.sha[:12]} is: recorded unverified")
    else:
        note = unsure = None
    if src.sha is not None and sha != src.sha:
        if gitsrc.has_commit(repo, src.sha) and gitsrc.is_ancestor(repo, src.sha, sha):
            # a branch that moved on still contains the pin: the pin is what gets locked
            note = f"ref {src.ref} has moved on past the pin; the pinned commit is on it"
            say(f"git {src.name}: {src.ref} is at {sha[:12]}, pin {src.sha[:12]} is an ancestor: ok")
            sha = src.sha
        else:
            raise CheckFailed(
                f"{src.name}: ref {src.ref!r} resolves to {sha} but the recipe pins {src.sha}, "
                f"which is not on that ref",
                hint=f"pin the commit you mean: set sha: {sha}, or ref: {src.sha} in the recipe")
    checked: list[str] = []
    for anc in src.requires_ancestors:
        if not gitsrc.is_ancestor(repo, anc, sha):
            present = gitsrc.has_commit(repo, anc)
            raise CheckFailed(
                f"{src.name}: required ancestor {anc} is "
                f"{'not an ancestor of' if present else 'absent, so not an ancestor of'} {sha}",
                hint="the fork is not based on the commit the recipe says; check ref and requires_ancestors")
        checked.append(anc)
    date, subject = gitsrc.commit_info(repo, sha)
    return LockedGit(name=src.name, url=src.url, ref=src.ref, sha=sha, verified=unsure is None,
                     reason=f"not verified: {unsure}" if unsure else None,
                     ancestors_checked=checked, commit_date=date, subject=subject, note=note)


def lock_from_remote(src: GitSource) -> LockedGit:
    """Ask the remote with ``git ls-remote`` (short timeout); unreachable -> unverified."""
    try:
        sha = gitsrc.resolve_ref(src.url, src.ref)
    except EnvironmentProblem:
        return _unverified(src, f"no mirror for {src.url} (git ls-remote: remote unreachable)")
    except InputError as exc:
        raise CheckFailed(f"{src.name}: {exc.message}", hint=exc.hint) from None
    if src.sha is not None and gitsrc.SHA_RE.match(src.ref) and sha == src.ref:
        return _unverified(src, f"no mirror for {src.url}; a bare SHA can only be checked in a clone")
    if src.sha is not None and sha != src.sha:  # moved on, or not on the ref: needs a clone
        return _unverified(src, f"ref {src.ref} no longer points at the pin; whether the pin is "
                                f"on it needs a mirror of {src.url}")
    if src.requires_ancestors:
        return LockedGit(name=src.name, url=src.url, ref=src.ref, sha=sha, verified=False,
                         reason=f"not verified: ref resolved by ls-remote, ancestors need a mirror of {src.url}")
    return LockedGit(name=src.name, url=src.url, ref=src.ref, sha=sha, verified=True)


def lock_git(src: GitSource, mirror_dir: str | Path | None, progress: Progress | None = None) -> LockedGit:
    """One git component of the lock (see the module docstring for the rules)."""
    say = progress or (lambda _msg: None)
    if src.unverified and src.sha is None:
        say(f"git {src.name}: recipe has no SHA ({src.unverified})")
        return _unverified(src, src.unverified)
    repo = gitsrc.mirror_path(src.url, mirror_dir)
    if repo is not None:
        say(f"git {src.name}: {src.ref} in mirror {repo}")
        try:
            return _with_recipe_reason(src, lock_from_mirror(src, repo, say))
        except CheckFailed as exc:
            if not src.unverified:
                raise
            # the recipe already says this pin cannot be fully checked: keep it, say why
            return _unverified(src, f"{src.unverified}; mirror check: {exc.message}")
    if mirror_dir:
        say(f"git {src.name}: not in mirror {mirror_dir}; recorded unverified")
        return _unverified(src, f"no mirror for {src.url} (not under the given --git-mirror)")
    say(f"git {src.name}: no mirror; trying git ls-remote {src.url}")
    return _with_recipe_reason(src, lock_from_remote(src))


def _with_recipe_reason(src: GitSource, locked: LockedGit) -> LockedGit:
    """An unverified pin the recipe already flagged keeps the recipe's words first."""
    if locked.verified or not src.unverified:
        return locked
    why = locked.reason.removeprefix("not verified: ") if locked.reason else ""
    return locked.model_copy(update={"reason": f"not verified: {src.unverified}; {why}"})
