"""Git repositories the tests make themselves (CI reaches no GitHub): a commit of given files, and a
bare mirror of it laid out as ``--git-mirror`` reads one (``OWNER+NAME/repo``).

The author and committer dates are fixed (``date``): draft and port read a commit's date (the
first known Apex commit not older than a pinned one), so a test names the day its setup was
published.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def git(*args: str, cwd: Path, date: str) -> str:
    """``git ARGS`` in ``cwd`` as a fixed author at ``date`` (ISO 8601); its stdout, stripped."""
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.org", GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def add_commit(work: Path, files: dict[str, str], subject: str, *, date: str) -> str:
    """One more commit on the branch checked out in ``work``: ``files`` (path -> text) written and
    committed with ``subject``; the commit's SHA."""
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    git("add", "-A", cwd=work, date=date)
    git("commit", "-q", "-m", subject, cwd=work, date=date)
    return git("rev-parse", "HEAD", cwd=work, date=date)


def commit(work: Path, files: dict[str, str], tag: str | None = None, *, date: str, branch: str = "main") -> str:
    """A new repository at ``work`` (its first branch ``branch``) holding one commit of ``files``
    (path -> text), tagged ``tag`` if given: the commit's SHA."""
    work.mkdir(parents=True)
    git("init", "-q", "-b", branch, cwd=work, date=date)
    sha = add_commit(work, files, "published", date=date)
    if tag:
        git("tag", tag, cwd=work, date=date)
    return sha


def mirrored(mirror: Path, slug: str, files: dict[str, str], tag: str | None = None, *, date: str) -> str:
    """A bare mirror of ``slug`` (``OWNER/NAME``) under ``mirror`` (``OWNER+NAME/repo``) holding one
    commit of ``files``, made in ``mirror``'s sibling ``work/``: the commit's SHA."""
    name = slug.replace("/", "+")
    sha = commit(mirror.parent / "work" / name, files, tag, date=date)
    git("clone", "-q", "--bare", str(mirror.parent / "work" / name), str(mirror / name / "repo"), cwd=mirror, date=date)
    return sha
