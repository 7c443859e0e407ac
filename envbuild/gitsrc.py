"""Git operations on pinned sources: find a local mirror, resolve a ref, check ancestry, clone.

Every function runs ``git`` with ``GIT_TERMINAL_PROMPT=0`` and a timeout, so an unreachable
remote (GitHub from an offline node) fails fast instead of hanging on a credential prompt.

Mirror layout: ``https://github.com/OWNER/NAME`` is looked up as ``MIRROR/OWNER/NAME``,
``MIRROR/OWNER/NAME.git`` or ``MIRROR/OWNER+NAME`` (a bare or a non-bare repository).

Example::

    repo = mirror_path("https://github.com/zhisbug/Megatron-LM", "/srv/mirror")
    sha = resolve_ref(repo, "alpa-osdi22-benchmark")
    assert is_ancestor(repo, "b31e1296354e979722627a6c4dedafe19b51fa97", sha)
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from urllib.parse import urlparse

from envbuild.errors import EnvironmentProblem, InputError

SHA_RE = re.compile(r"^[0-9a-f]{40}$")
LS_REMOTE_TIMEOUT = 10.0  # seconds; a reachable remote answers ls-remote well within this
LOCAL_TIMEOUT = 120.0


class GitError(EnvironmentProblem):
    """A git command failed (missing object, unreachable remote, not a repository)."""


def git_env() -> dict[str, str]:
    """Environment for git subprocesses: never prompt, never read the user's askpass."""
    env = dict(os.environ)
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/false", "SSH_ASKPASS": "/bin/false",
                "GIT_SSH_COMMAND": "ssh -o BatchMode=yes -o ConnectTimeout=5", "LC_ALL": "C"})
    return env


def run_git(args: list[str], *, cwd: str | Path | None = None, timeout: float = LOCAL_TIMEOUT,
            check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``git ARGS``; raise GitError (with git's last stderr line) when it fails or times out."""
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, env=git_env(), capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise GitError("git is not installed", hint="install git (apt-get install git)") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} timed out after {timeout:.0f} s",
                       hint="the remote is unreachable; use --git-mirror DIR") from None
    if check and proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise GitError(f"git {' '.join(args[:2])} failed: {last}",
                       hint="check the URL, the ref and the mirror")
    return proc


def github_slug(url: str) -> tuple[str, str] | None:
    """``(OWNER, NAME)`` of a GitHub URL (https, ssh or git@ form), else None."""
    m = re.match(r"^git@github\.com:(?P<path>.+)$", url)
    path = m.group("path") if m else None
    if path is None:
        parsed = urlparse(url)
        if parsed.hostname not in ("github.com", "www.github.com"):
            return None
        path = parsed.path
    parts = [p for p in path.strip("/").split("/") if p]
    if len(parts) < 2:
        return None
    return parts[0], parts[1].removesuffix(".git")


def _is_repo(path: Path) -> bool:
    return path.is_dir() and ((path / "HEAD").is_file() and (path / "objects").is_dir()
                              or (path / ".git").exists())


def mirror_path(url: str, mirror_dir: str | Path | None) -> Path | None:
    """The local mirror of ``url`` under ``mirror_dir``, or None when there is none."""
    if not mirror_dir:
        return None
    slug = github_slug(url)
    if slug is None:
        return None
    owner, name = slug
    root = Path(mirror_dir)
    candidates = [root / owner / name, root / owner / f"{name}.git", root / f"{owner}+{name}"]
    for cand in candidates:
        if _is_repo(cand):
            return cand
        if cand.is_dir():  # a folder holding the git directory one level down
            for sub in sorted(cand.iterdir()):
                if _is_repo(sub):
                    return sub
    return None


def _is_local(url_or_path: str | Path) -> bool:
    text = str(url_or_path)
    return isinstance(url_or_path, Path) or "://" not in text and not text.startswith("git@")


def resolve_ref(url_or_path: str | Path, ref: str, *, timeout: float = LS_REMOTE_TIMEOUT) -> str:
    """The full commit SHA that ``ref`` (branch, tag, full or short SHA) names.

    A local path is read with ``git rev-parse``; a URL with ``git ls-remote`` under a short
    timeout (GitError when the remote does not answer, InputError when the ref is absent).
    """
    if _is_local(url_or_path):
        repo = Path(url_or_path)
        if not _is_repo(repo):
            raise GitError(f"{repo} is not a git repository", hint="check the mirror layout")
        for cand in (f"refs/heads/{ref}", f"refs/tags/{ref}", f"refs/remotes/origin/{ref}", ref):
            proc = run_git(["rev-parse", "--verify", "--quiet", f"{cand}^{{commit}}"], cwd=repo,
                           check=False)
            if proc.returncode == 0 and SHA_RE.match(proc.stdout.strip()):
                return proc.stdout.strip()
        raise InputError(f"ref {ref!r} not found in {repo}",
                         hint=f"known branches: {', '.join(branches(repo)[:12]) or '(none)'}")
    proc = run_git(["ls-remote", "--", str(url_or_path), ref, f"{ref}^{{}}"], timeout=timeout)
    rows = [line.split("\t") for line in proc.stdout.splitlines() if "\t" in line]
    peeled = [sha for sha, name in rows if name.endswith("^{}")]
    exact = peeled or [sha for sha, name in rows if name in (f"refs/heads/{ref}", f"refs/tags/{ref}")]
    found = exact or [sha for sha, _ in rows]
    if not found:
        if SHA_RE.match(ref):
            return ref  # a SHA is not advertised as a ref; it can only be checked after a fetch
        raise InputError(f"ref {ref!r} not found at {url_or_path}", hint="check the branch or tag name")
    return found[0]


def branches(repo: str | Path) -> list[str]:
    """Branch names of a local repository (heads and origin/*), sorted."""
    proc = run_git(["for-each-ref", "--format=%(refname:short)", "refs/heads", "refs/remotes"],
                   cwd=repo, check=False)
    return sorted(proc.stdout.split())


def has_commit(repo: str | Path, sha: str) -> bool:
    """Whether the commit ``sha`` exists in the local repository ``repo``."""
    proc = run_git(["cat-file", "-e", f"{sha}^{{commit}}"], cwd=repo, check=False)
    return proc.returncode == 0


def is_ancestor(repo: str | Path, ancestor: str, descendant: str) -> bool:
    """Whether ``ancestor`` is reachable from ``descendant`` (False when it is absent)."""
    if not has_commit(repo, ancestor):
        return False
    proc = run_git(["merge-base", "--is-ancestor", ancestor, descendant], cwd=repo, check=False)
    if proc.returncode in (0, 1):
        return proc.returncode == 0
    raise GitError(f"cannot compare {ancestor[:12]} and {descendant[:12]} in {repo}: "
                   f"{proc.stderr.strip()}", hint="is the descendant commit in the mirror?")


def commit_info(repo: str | Path, sha: str) -> tuple[str, str]:
    """``(committer date ISO-8601, subject line)`` of a commit."""
    proc = run_git(["show", "-s", "--format=%cI%x00%s", sha], cwd=repo)
    date, _, subject = proc.stdout.rstrip("\n").partition("\x00")
    return date, subject

