"""The one reader of git here: a repository at one commit, its files listed and read with
``git ls-tree`` and ``git show COMMIT:PATH`` (never a checkout, never the repository's code).

A SOURCE is a local repository (a path) or a URL looked up in a git mirror folder the way
the lock finds mirrors (``envbuild.gitsrc.mirror_path``); the ref is resolved there
(``envbuild.gitsrc.resolve_ref``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from envbuild import gitsrc
from envbuild.errors import EnvironmentProblem, InputError

MAX_FILE = 2 << 20  # bytes: a README or requirements file is far smaller; larger ones are not read
MIRROR_HINT = ("a mirror of https://github.com/OWNER/NAME lies at DIR/OWNER/NAME, DIR/OWNER/NAME.git "
               "or DIR/OWNER+NAME (bare or not)")


@dataclass(frozen=True)
class Tree:
    """A repository's tree at ``commit``; ``label`` names a followed dependency in citations."""

    repo: Path
    commit: str
    label: str | None = None

    def files(self) -> list[str]:
        """Every file path of the tree (submodules are not files)."""
        out = gitsrc.run_git(["ls-tree", "-r", "-z", "--name-only", self.commit], cwd=self.repo).stdout
        return [p for p in out.split("\0") if p]

    def gitlink(self, path: str) -> str | None:
        """The commit a submodule at ``path`` is pinned to, or None."""
        out = gitsrc.run_git(["ls-tree", "-z", self.commit, "--", path], cwd=self.repo, check=False).stdout
        m = re.match(r"^160000 commit ([0-9a-f]{40})\t", out)
        return m.group(1) if m else None

    def read(self, path: str) -> str | None:
        """The text of ``path`` at the commit; None when absent, too large or not UTF-8."""
        size = gitsrc.run_git(["cat-file", "-s", f"{self.commit}:{path}"], cwd=self.repo, check=False)
        if size.returncode != 0 or int(size.stdout.strip() or 0) > MAX_FILE:
            return None
        proc = gitsrc.run_git(["show", f"{self.commit}:{path}"], cwd=self.repo, check=False)
        return proc.stdout if proc.returncode == 0 else None

    def date(self) -> str:
        """The commit's committer date, YYYY-MM-DD."""
        return gitsrc.commit_info(self.repo, self.commit)[0][:10]


def is_url(source: str) -> bool:
    return "://" in source or bool(re.match(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:", source))


def _repository(path: Path) -> bool:
    proc = gitsrc.run_git(["rev-parse", "--git-dir"], cwd=path, check=False) if path.is_dir() else None
    return proc is not None and proc.returncode == 0


def open_source(source: str, ref: str, mirror_dir: str | Path | None) -> tuple[Tree, str]:
    """``(tree at the resolved commit, the URL or path the recipe names)`` of SOURCE at REF."""
    if ref.startswith("-") or not ref.strip():
        raise InputError(f"--ref {ref!r} is not a branch, tag or commit", hint="e.g. --ref v1.0")
    if is_url(source):
        if not mirror_dir:
            raise InputError(f"{source} is a URL: envbuild reads repositories from a local mirror",
                             hint=f"pass --git-mirror DIR ({MIRROR_HINT}), or give a local repository's path")
        repo = gitsrc.mirror_path(source, mirror_dir)
        if repo is None:
            raise EnvironmentProblem(f"no mirror of {source} under {mirror_dir}", hint=MIRROR_HINT)
        url = source.removesuffix("/").removesuffix(".git")
    else:
        repo = Path(source).resolve()
        if not _repository(repo):
            raise InputError(f"{source} is not a git repository",
                             hint="give a repository's folder (git init; git commit) or a URL with --git-mirror")
        origin = gitsrc.run_git(["config", "--get", "remote.origin.url"], cwd=repo, check=False).stdout.strip()
        url = origin.removesuffix(".git") if origin and is_url(origin) else str(repo)
    return Tree(repo, gitsrc.resolve_ref(repo, ref)), url


def follow(url: str, ref: str | None, mirror_dir: str | Path | None, label: str) -> tuple[Tree | None, str]:
    """A VCS dependency's tree in the mirror, at ``ref`` (None: the mirror's HEAD), or None
    with the reason it could not be read."""
    repo = gitsrc.mirror_path(url, mirror_dir) if mirror_dir else None
    if repo is None:
        return None, ("no --git-mirror given" if not mirror_dir else f"no mirror of {url} under {mirror_dir}")
    try:
        sha = gitsrc.resolve_ref(repo, ref or "HEAD")
    except InputError:
        return None, f"{ref} is not in the mirror {repo}"
    return Tree(repo, sha, f"{label}@{sha[:10]}"), ""


def default_branch(tree: Tree) -> str:
    """The branch the mirror's HEAD names (``main``), else ``HEAD``."""
    proc = gitsrc.run_git(["symbolic-ref", "--short", "HEAD"], cwd=tree.repo, check=False)
    return proc.stdout.strip() or "HEAD"
