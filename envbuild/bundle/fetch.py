"""Get one locked distribution file or one recipe data file, its sha256 checked: the only
network code of bundling.

The lock names each file's URL and sha256 (``envbuild.lock.schema.Dist``). A file is taken,
in this order, from the wheelhouse (``--wheelhouse``; always so for ``source: wheelhouse``),
from the download cache (``$ENVBUILD_CACHE_DIR/dists/<sha256>/<file>``), or downloaded once
from its URL. Whatever the origin, its bytes must hash to the lock's sha256, or nothing is
packed (CheckFailed naming the file, the expected and the actual digest).

A download is bounded: neither the lock nor a recipe records a file's size, so a response may
be at most the stated maximum (``MAX_DIST_BYTES`` for a locked file, ``MAX_DATA_BYTES`` for a
recipe's data; ``$ENVBUILD_MAX_DOWNLOAD_BYTES`` sets both), refused at once when its
Content-Length says more and stopped when its bytes pass it: an endless response from a
compromised mirror cannot fill the disk. A file is written to a ``.part-`` file beside its
place and moved there whole; on any failure the partial file is removed and the error names
it. ``http://`` is taken only where a sha256 is pinned (every locked file; a recipe's data file
with ``sha256``): unpinned bytes come over TLS or not at all.
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
MAX_DIST_BYTES = 4 << 30  # a CUDA build of torch is ~2.5 GB, the largest wheel a lock names
MAX_DATA_BYTES = 16 << 30  # a recipe's datasets (the largest shipped one is ~1 GB compressed)


def max_bytes(default: int) -> int:
    """The stated maximum of one download: ``$ENVBUILD_MAX_DOWNLOAD_BYTES``, else ``default``."""
    raw = os.environ.get("ENVBUILD_MAX_DOWNLOAD_BYTES")
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise InputError(f"ENVBUILD_MAX_DOWNLOAD_BYTES={raw!r} is not a number of bytes",
                         hint="a positive integer, e.g. 8589934592 for 8 GiB")
    return value


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


def _download(url: str, dest: Path, name: str, *, limit: int, pinned: bool, hint: str) -> str:
    """``url`` streamed into ``dest`` (through a ``.part-`` file beside it, moved into place
    whole), at most ``limit`` bytes; its sha256. ``pinned``: the caller checks the bytes against
    a recorded sha256, so ``http://`` may serve them. On any failure nothing is left at ``dest``
    nor beside it, and the error names the partial file removed."""
    from envbuild import http  # the client (requests) only when something is downloaded

    if not url.startswith("https://") and not (pinned and url.startswith("http://")):
        raise InputError(f"{name}: {url}: only https:// is fetched for a file without a recorded sha256",
                         hint="give the https:// URL, or record the file's sha256 (then http:// is checked by it)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".part-{dest.name[:80]}-")
    h = hashlib.sha256()
    size = 0
    try:
        with os.fdopen(fd, "wb") as out:
            with http.get(url, timeout=TIMEOUT, stream=True) as resp:
                resp.raise_for_status()
                if not pinned and not resp.url.startswith("https://"):
                    raise InputError(f"{name}: {url} was redirected to {resp.url}: not https",
                                     hint="a file without a recorded sha256 is fetched over https only")
                announced = resp.headers.get("Content-Length", "")
                if announced.isdigit() and int(announced) > limit:
                    raise CheckFailed(f"{name}: {url} announces {int(announced)} bytes, more than the "
                                      f"{limit} a download may take (the partial file {tmp} removed)",
                                      hint="a larger file than expected: check the mirror; to take it, set "
                                           "ENVBUILD_MAX_DOWNLOAD_BYTES")
                for block in resp.iter_content(1 << 20):
                    size += len(block)
                    if size > limit:
                        raise CheckFailed(f"{name}: {url} sent more than {limit} bytes: stopped (the partial "
                                          f"file {tmp} removed)",
                                          hint="a response without end, or a larger file than expected: check the "
                                               "mirror; to take a larger file, set ENVBUILD_MAX_DOWNLOAD_BYTES")
                    h.update(block)
                    out.write(block)
        os.replace(tmp, dest)
        return h.hexdigest()
    except (OSError, http.RequestException) as exc:
        raise EnvironmentProblem(f"{name}: cannot download {url}: {exc} (the partial file {tmp} removed)",
                                 hint=hint) from None
    finally:
        if os.path.lexists(tmp):
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
        tmp = cached.with_name(f".check-{cached.name}")
        got = _download(dist.url, tmp, name, limit=max_bytes(MAX_DIST_BYTES), pinned=True,
                        hint="check the network, or pass --wheelhouse DIR holding the file")
        if got != dist.sha256:
            tmp.unlink(missing_ok=True)
            raise CheckFailed(f"{name}: {dist.url} downloaded with sha256 {got}, the lock says {dist.sha256} "
                              "(the download removed)",
                              hint="the index serves other bytes than when the lock was made: re-lock")
        os.replace(tmp, cached)
        origin = "download"
    _check(cached, dist.sha256, name, f"the cache {cached.parent}")
    shutil.copyfile(cached, dest)
    return origin


def fetch_data_file(name: str, url: str, want: str | None, dest: Path, mirror: Path | None) -> tuple[str, str]:
    """A recipe data file at ``dest``: from ``mirror`` (a file of --data-mirror) when it
    exists, else downloaded from ``url``; its sha256 must be ``want`` (the recipe's) when the
    recipe gives one. Returns (origin, sha256); nothing is left at ``dest`` on a mismatch. A
    download is at most ``MAX_DATA_BYTES`` (``max_bytes``), over https unless ``want`` pins it."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if mirror is not None and mirror.is_file():
        shutil.copyfile(mirror, dest)
        origin = f"the data mirror {mirror.parent}"
    else:
        _download(url, dest, f"data {name}", limit=max_bytes(MAX_DATA_BYTES), pinned=want is not None,
                  hint=f"on a machine that reaches it: curl -fL -o DIR/{dest.name} {shlex.quote(url)}; "
                       "then pass --data-mirror DIR")
        origin = url
    got = _hash(dest)
    if want is not None and got != want:
        dest.unlink()
        raise CheckFailed(f"data {name}: {dest.name} from {origin} has sha256 {got}, the recipe says {want}",
                          hint="the file changed since the recipe recorded its digest: nothing was packed")
    return origin, got
