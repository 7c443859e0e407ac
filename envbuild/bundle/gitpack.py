"""A pinned commit as a shallow bare repository, made from the local git mirror.

Why not ``git bundle``: a bundle of a depth-1 history lists the parent commits as
prerequisites, and ``git clone`` refuses it ("Repository lacks these prerequisite commits");
a bundle of the full history needs every object of that history, and mirrors may lack some
(the NVIDIA/apex snapshot misses one blob of its 2019 history), besides being 4 to 8 times
larger. A depth-1 bare repository (``.git/shallow`` names the pinned commit) is what
``git clone`` on the node reads as any other remote: the clone has the pinned SHA, its tree,
and ``refs/heads/<ref>`` pointing at it, so ``ls-remote origin <ref>`` answers the pin.

``shallow_repo(mirror, sha, ref, dest)`` runs git on the controller only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from envbuild.errors import CheckFailed, EnvironmentProblem

GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_CONFIG_NOSYSTEM": "1"}


def _git(args: list[str], cwd: Path | None = None) -> str:
    import os

    env = {**os.environ, **GIT_ENV}
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env,
                              timeout=600, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise EnvironmentProblem("git is not installed on the controller", hint="install git") from None
    if proc.returncode != 0:
        raise CheckFailed(f"git {' '.join(args[:3])} failed: {(proc.stderr or proc.stdout).strip()[-400:]}")
    return proc.stdout.strip()


def branch_ref(ref: str) -> str:
    """``main`` -> ``refs/heads/main``; a full ref keeps its meaning. ``HEAD`` (a git dependency
    the lock pinned on its default branch) -> ``refs/heads/pinned``: git would take a branch
    named HEAD as ambiguous with HEAD itself; the repository's HEAD points at it either way."""
    if ref.startswith("refs/"):
        return ref
    return "refs/heads/pinned" if ref == "HEAD" else f"refs/heads/{ref}"


def shallow_repo(mirror: Path, sha: str, ref: str, dest: Path, without: list[str] | tuple = ()) -> Path:
    """``dest`` (a new bare repository) holding ``sha`` at depth 1 as ``ref`` and HEAD.

    ``without``: files of ``sha``'s tree that the mirror may lack (documents a snapshot left
    out, ``GitSource.without``). When it lacks some, every other object of the commit is
    packed into ``dest`` with no ``shallow`` file (git would serve a shallow repository through
    upload-pack, which refuses missing objects; a plain one is cloned by copying its objects),
    and the node checks the tree out without them. A lacking file not in ``without`` is refused."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    _git(["init", "--quiet", "--bare", "--template=", str(dest)])
    target = branch_ref(ref)
    lacking = absent_blobs(Path(mirror), sha)
    if lacking:
        extra = sorted(set(lacking) - set(without))
        if extra:
            raise CheckFailed(f"{mirror}: the mirror lacks {len(extra)} file(s) of {sha[:12]}: {', '.join(extra[:5])}",
                              hint="a fuller mirror, or (documents only) the source's 'without' list")
        _pack_without(Path(mirror), sha, dest)
        _git(["update-ref", target, sha], cwd=dest)
        _git(["symbolic-ref", "HEAD", target], cwd=dest)
        return dest
    _git(["-c", "uploadpack.allowAnySHA1InWant=true", "-c", "protocol.file.allow=always", "fetch",
          "--quiet", "--no-tags", "--depth", "1", f"file://{Path(mirror).resolve()}", f"{sha}:{target}"],
         cwd=dest)
    _git(["symbolic-ref", "HEAD", target], cwd=dest)
    got = _git(["rev-parse", target], cwd=dest)
    if got != sha:
        raise CheckFailed(f"{mirror}: fetched {got} for {sha}")
    _git(["fsck", "--connectivity-only", "--no-dangling"], cwd=dest)
    for junk in ("description", "FETCH_HEAD", "config.worktree"):
        (dest / junk).unlink(missing_ok=True)
    return dest


def submodule_commits(mirror: Path, sha: str, paths: list[str]) -> list[tuple[str, str, str]]:
    """``[(path, url, commit)]`` of the submodules ``paths`` as the tree of ``sha`` records them:
    the gitlink of each path and its URL in that commit's ``.gitmodules``."""
    import tempfile

    try:
        text = _git(["-C", str(mirror), "show", f"{sha}:.gitmodules"])
    except CheckFailed:
        raise CheckFailed(f"{mirror} at {sha[:12]} has no .gitmodules, but the plan needs submodules "
                          f"{', '.join(paths)}") from None
    with tempfile.NamedTemporaryFile("w", suffix=".gitmodules") as fh:
        fh.write(text + "\n")
        fh.flush()
        listed = _git(["config", "--file", fh.name, "--get-regexp", r"^submodule\..*\.(path|url)$"])
    keys: dict[str, dict[str, str]] = {}
    for line in listed.splitlines():
        key, _, value = line.partition(" ")
        name, field = key[len("submodule."):].rsplit(".", 1)
        keys.setdefault(name, {})[field] = value
    urls = {v["path"]: v.get("url", "") for v in keys.values() if "path" in v}
    out = []
    for path in paths:
        row = _git(["-C", str(mirror), "ls-tree", sha, "--", path]).split()
        if len(row) < 3 or row[0] != "160000" or path not in urls:
            raise CheckFailed(f"{mirror} at {sha[:12]}: {path} is not a submodule of that commit",
                              hint="the option that needs it does not fit this commit; see envbuild check")
        out.append((path, urls[path], row[2]))
    return out


def absent_blobs(repo: Path, sha: str) -> list[str]:
    """The paths of ``sha``'s tree whose blob ``repo`` lacks (a snapshot that left files out)."""
    listed = _git(["ls-tree", "-r", "-z", "--full-tree", sha], cwd=repo)
    blobs = [(e.split("\t", 1)[0].split()[2], e.split("\t", 1)[1]) for e in listed.split("\0")
             if e and e.split()[1] == "blob"]
    if not blobs:
        return []
    check = subprocess.run(["git", "cat-file", "--batch-check=%(objectname) %(objecttype)"], cwd=repo,
                           input="".join(f"{obj}\n" for obj, _ in blobs), capture_output=True, text=True,
                           env={**os.environ, **GIT_ENV}, check=True)
    missing = {line.split()[0] for line in check.stdout.splitlines() if line.endswith(" missing")}
    return sorted(path for obj, path in blobs if obj in missing)


def _pack_without(mirror: Path, sha: str, dest: Path) -> None:
    """The commit ``sha``, its trees and every blob ``mirror`` has of them, as one pack in ``dest``."""
    env = {**os.environ, **GIT_ENV}
    objects = subprocess.run(["git", "rev-list", "--objects", "--missing=allow-any", "--no-walk", sha],
                             cwd=mirror, capture_output=True, check=True, env=env).stdout
    pack = subprocess.run(["git", "pack-objects", "--stdout", "-q"], cwd=mirror, input=objects,
                          capture_output=True, check=True, env=env).stdout
    subprocess.run(["git", "index-pack", "--stdin"], cwd=dest, input=pack, capture_output=True,
                   check=True, env=env)
