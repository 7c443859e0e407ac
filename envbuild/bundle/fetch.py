"""Get one locked distribution file or one recipe data file, its sha256 checked: the only
network code of bundling.

The lock names each file's URL and sha256 (``envbuild.lock.schema.Dist``). A file is taken,
in this order, from the wheelhouse (``--wheelhouse``; always so for ``source: wheelhouse``),
from the download cache (``$ENVBUILD_CACHE_DIR/dists/<sha256>/<file>``), or downloaded once
from its URL. Whatever the origin, its bytes must hash to the lock's sha256, or nothing is
packed (CheckFailed naming the file, the expected and the actual digest).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import tempfile
from pathlib import Path

from envbuild.errors import CheckFailed, EnvironmentProblem, InputError
from envbuild.lock.schema import LockedPackage

TIMEOUT = 120.0


def cache_root() -> Path:
    root = os.environ.get("ENVBUILD_CACHE_DIR") or Path.home() / ".cache" / "envbuild"
    return Path(root) / "dists"


def _hash(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def _check(path: Path, want: str, name: str, origin: str) -> None:
    got = _hash(path)
    if got != want:
        raise CheckFailed(f"{name}: {path.name} from {origin} has sha256 {got}, the lock says {want}",
                          hint="the file changed since the lock was made: re-lock, or fix the wheelhouse")


def _download(url: str, dest: Path, want: str, name: str) -> None:
    from envbuild import http  # the client (requests) only when something is downloaded

    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".part-")
    h = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            with http.get(url, timeout=TIMEOUT, stream=True) as resp:
                resp.raise_for_status()
                for block in resp.iter_content(1 << 20):
                    h.update(block)
                    out.write(block)
        if h.hexdigest() != want:
            raise CheckFailed(f"{name}: {url} downloaded with sha256 {h.hexdigest()}, the lock says {want}",
                              hint="the index serves other bytes than when the lock was made: re-lock")
        os.replace(tmp, dest)
    except (OSError, http.RequestException) as exc:
        raise EnvironmentProblem(f"{name}: cannot download {url}: {exc}",
                                 hint="check the network, or pass --wheelhouse DIR holding the file") from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def fetch_dist(pkg: LockedPackage, dest: Path, wheelhouse: Path | None) -> str:
    """Put ``pkg``'s locked file at ``dest`` (hash-checked); returns where it came from."""
    dist = pkg.dist
    if dist is None or not pkg.verified or not dist.sha256:
        raise CheckFailed(f"{pkg.name} {pkg.version}: the lock has no verified file for it",
                          hint="re-lock with a reachable index or a wheelhouse; a bundle carries only hashed files")
    name = f"{pkg.name} {pkg.version}"
    if wheelhouse is not None and (wheelhouse / dist.filename).is_file():
        _check(wheelhouse / dist.filename, dist.sha256, name, f"the wheelhouse {wheelhouse}")
        shutil.copyfile(wheelhouse / dist.filename, dest)
        return "wheelhouse"
    if not dist.url.startswith(("https://", "http://")):  # a lock made before upstream URLs
        raise InputError(f"{name}: the lock takes {dist.filename} from a wheelhouse",
                         hint=f"pass --wheelhouse DIR holding {dist.filename}")
    cached = cache_root() / dist.sha256 / dist.filename
    origin = "cache"
    if not cached.is_file():
        _download(dist.url, cached, dist.sha256, name)
        origin = "download"
    _check(cached, dist.sha256, name, f"the cache {cached.parent}")
    shutil.copyfile(cached, dest)
    return origin


def fetch_data_file(name: str, url: str, want: str | None, dest: Path, mirror: Path | None) -> tuple[str, str]:
    """A recipe data file at ``dest``: from ``mirror`` (a file of --data-mirror) when it
    exists, else downloaded from ``url``; its sha256 must be ``want`` (the recipe's) when the
    recipe gives one. Returns (origin, sha256); nothing is left at ``dest`` on a mismatch."""
    from envbuild import http  # the client (requests) only when something is downloaded

    dest.parent.mkdir(parents=True, exist_ok=True)
    if mirror is not None and mirror.is_file():
        shutil.copyfile(mirror, dest)
        origin = f"the data mirror {mirror.parent}"
    else:
        try:
            with http.get(url, timeout=TIMEOUT, stream=True) as resp, open(dest, "wb") as out:
                resp.raise_for_status()
                for block in resp.iter_content(1 << 20):
                    out.write(block)
        except (OSError, http.RequestException) as exc:
            dest.unlink(missing_ok=True)
            raise EnvironmentProblem(f"data {name}: cannot download {url}: {exc}",
                                     hint=f"on a machine that reaches it: curl -fL -o DIR/{dest.name} "
                                          f"{shlex.quote(url)}; then pass --data-mirror DIR") from None
        origin = url
    got = _hash(dest)
    if want is not None and got != want:
        dest.unlink()
        raise CheckFailed(f"data {name}: {dest.name} from {origin} has sha256 {got}, the recipe says {want}",
                          hint="the file changed since the recipe recorded its digest: nothing was packed")
    return origin, got
