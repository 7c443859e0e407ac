"""Atomic file writes: a lockfile, report or facts file is either whole or absent."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any


def write_atomic(path: str | os.PathLike, data: str | bytes, mode: int | None = None) -> Path:
    """Write ``data`` to ``path`` via a temporary file in the same folder and rename it.

    An existing file keeps its permission bits (a 0755 script stays executable, a 0600 file
    stays private); a new file gets ``mode``, by default 0666 less the process umask (as
    ``open()`` would). The temporary file is 0600 until the rename, so nothing is readable
    half-written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    try:
        final = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        final = mode if mode is not None else 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, final)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def _umask() -> int:
    """The process umask, read without changing it (Linux /proc); 022 when unknown."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def canonical_json(obj: Any) -> str:
    """Canonical JSON (sorted keys, no spaces) used for digests and fingerprints."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """sha256 of a file, read in blocks: the one file hash of the controller side."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_text(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()
