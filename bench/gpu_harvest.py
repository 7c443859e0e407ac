"""Seed the controller's build cache with what a GPU node built, carried back in parts.

A node's install builds Apex (its install's Apex step: a wheel) and a source's in-tree outputs (a
build step with ``build_outputs``: ``outputs.tar``, the archive ``envbuild.node.treecache`` saves,
e.g. Megatron's fused kernels) into the node's controller build cache;
``bash bench/gpu_session.sh harvest`` cuts each such product into ``$OUT/prebuilt/``: ``KEY.sha256``
(one ``sha256sum`` line, ``<64 hex>  <file name>``) and ``KEY.part.00``, ``KEY.part.01``,
... (``split -b 15M -d -a 2``; a product over 7 parts is gzipped first and decompressed here),
KEY the build-cache key (``apex-6424da3b4faa-837967d631b5195728b8``, ``tree-megatron-c28bbd208d16-...``).
This script joins the parts, checks them and places the
product as ``<ENVBUILD_HOME>/cache/wheels/<KEY>/<file>``, the cache ``envbuild bundle`` reads: the
next bundle packs it as prebuilt (envbuild/bundle/pack.py, ``_pack_prebuilt``) and the nodes
install or restore it instead of building it.

    python bench/gpu_harvest.py FOLDER [FOLDER ...] [--cache DIR] [--replace] [--json]

Each FOLDER holds the files of one call's ``$OUT/prebuilt`` (a harvest may come back over several
calls: the parts of one KEY are gathered from all the folders). For each ``KEY.sha256``: KEY must
be a cache key (the bundle manifest's ``KEY``), its line a sha256sum line naming a plain ``.whl``
file name or ``outputs.tar``; the parts ``00`` to ``N-1`` must all be there; they are joined into a
temporary file beside ``<cache>/<KEY>/``, whose sha256 must be the line's and which must open as a
zip with a ``*.dist-info/RECORD`` entry (a wheel) or pass the checks the node's restore makes of an
archive before it writes (``envbuild.node.treecache.check_archive``: plain files and folders under
relative paths, none twice, the files' times well-formed); then it is moved into place (``os.replace``,
one filesystem) with ``<cache>/<KEY>/harvest.json`` (key, file, sha256, size, from, harvested_at).
A cache that already holds that file (same name, same sha256) is left as it is; one that holds
another product for KEY is refused unless ``--replace`` (which removes the others: the bundle
packs the first).

Exit codes: 0 every key seeded or already there; 1 a check failed (a missing part, a sha256, zip
or tar that does not match, another product in the cache): nothing written for that key; two
folders whose ``KEY.sha256`` disagree stop every key; 2 bad input or usage (a bad KEY, sha256 line
or file name, a missing folder, no ``KEY.sha256`` at all): nothing written.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tarfile
import tempfile
import zipfile
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from envbuild import rundir  # noqa: E402
from envbuild.bundle.buildcache import TREE_ARCHIVE, cached_artifacts  # noqa: E402
from envbuild.bundle.manifest import KEY  # noqa: E402
from envbuild.fsio import sha256_file, write_atomic  # noqa: E402
from envbuild.node.treecache import TreeCacheError, check_archive  # noqa: E402

SHA_SUFFIX = ".sha256"
PART = re.compile(r"^(?P<key>.+)\.part\.(?P<n>[0-9]{2,})$")
SHA_LINE = re.compile(r"^(?P<sha>[0-9a-fA-F]{64}) [ *](?P<name>.+)$")
RECORD = re.compile(r"^[^/]+\.dist-info/RECORD$")
CHUNK = 1 << 20
GZIP_MAGIC = b"\x1f\x8b"
# what a gzipped product may inflate to: the largest one harvested so far is 122 MB (run 23's
# metaseq objects); a stream that inflates past this (a gzip bomb, a node gone wrong) is refused
# before it fills the disk, and no chunk is inflated into memory beyond CHUNK at a time
MAX_PRODUCT = 4 << 30


class HarvestError(Exception):
    """An expected failure: ``code`` 1 (a check failed) or 2 (bad input)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Harvest:
    """One KEY's product (a wheel or a tree archive) as the folders declare it and the parts that carry it."""

    key: str
    file: str
    sha256: str
    parts: dict[int, list[Path]] = field(default_factory=dict)


def product_name(name: str) -> bool:
    """A file name the cache folder can hold as it is: the tree archive's, or a wheel's (no folder,
    no ``..``, ends ``.whl``)."""
    return name == TREE_ARCHIVE or (name.endswith(".whl") and ".." not in name and KEY.fullmatch(name) is not None)


def read_sha_file(path: Path) -> tuple[str, str, str]:
    """(key, sha256, file name) of ``KEY.sha256``; HarvestError 2 for a bad key, line or name."""
    key = path.name[: -len(SHA_SUFFIX)]
    if not KEY.fullmatch(key):
        raise HarvestError(f"{path}: {key!r} is not a build-cache key", 2)
    lines = path.read_text(errors="replace").splitlines()
    if len(lines) != 1:
        raise HarvestError(f"{path}: {len(lines)} lines, expected one sha256sum line", 2)
    m = SHA_LINE.match(lines[0])
    if not m:
        raise HarvestError(f"{path}: line 1 is not '<64 hex>  <file>': {lines[0]!r}", 2)
    name = m.group("name")
    if not product_name(name):
        raise HarvestError(f"{path}: line 1 names {name!r}, neither a plain .whl file name nor {TREE_ARCHIVE}", 2)
    return key, m.group("sha").lower(), name


def gather(folders: list[Path]) -> list[Harvest]:
    """Every KEY the folders declare, with its parts from all of them. HarvestError 2 for bad input,
    1 for two folders that declare different files for one KEY."""
    missing = [str(f) for f in folders if not f.is_dir()]
    if missing:
        raise HarvestError(f"no such folder: {', '.join(missing)}", 2)
    found: dict[str, Harvest] = {}
    for folder in folders:
        for path in sorted(folder.glob(f"*{SHA_SUFFIX}")):
            key, sha, name = read_sha_file(path)
            seen = found.setdefault(key, Harvest(key, name, sha))
            if (seen.file, seen.sha256) != (name, sha):
                raise HarvestError(f"{path}: {name} {sha[:12]}... but another folder declares "
                                   f"{seen.file} {seen.sha256[:12]}... for {key}", 1)
    if not found:
        raise HarvestError(f"no KEY{SHA_SUFFIX} in {', '.join(map(str, folders))}", 2)
    orphans = set()
    for folder in folders:
        for path in sorted(folder.iterdir()):
            m = PART.match(path.name)
            if m and m.group("key") in found and path.is_file():
                found[m.group("key")].parts.setdefault(int(m.group("n")), []).append(path)
            elif m and m.group("key") not in found:
                orphans.add(m.group("key"))
    for key in sorted(orphans):
        print(f"warning: parts of {key} but no {key}{SHA_SUFFIX} in the folders: left alone", file=sys.stderr)
    return [found[k] for k in sorted(found)]


def part_paths(h: Harvest) -> list[Path]:
    """The parts 00..N-1 in order, one file each; HarvestError 1 for a gap or two that differ."""
    if not h.parts:
        raise HarvestError(f"{h.key}: no {h.key}.part.NN in the folders", 1)
    n = max(h.parts) + 1
    gaps = [f"{h.key}.part.{i:02d}" for i in range(n) if i not in h.parts]
    if gaps:
        raise HarvestError(f"{h.key}: missing {', '.join(gaps)} (parts 00..{n - 1:02d})", 1)
    out = []
    for i in range(n):
        first, *others = h.parts[i]
        for other in others:
            if sha256_file(other) != sha256_file(first):
                raise HarvestError(f"{h.key}: {first} and {other} differ", 1)
        out.append(first)
    return out


def join_parts(parts: list[Path], dest_dir: Path, key: str, max_size: int = MAX_PRODUCT) -> tuple[Path, str, int]:
    """The parts joined into a temporary file in ``dest_dir``: (path, sha256, size). Parts whose
    stream is gzip (``harvest`` gzips a product that would take over 7 parts; no wheel or tar
    begins with gzip's magic) are decompressed as they are joined, so the sha256 and the file are
    the product's own; HarvestError 1 for a gzip stream that is cut short, has bytes after it or
    inflates past ``max_size``."""
    with parts[0].open("rb") as f:
        gz = f.read(2) == GZIP_MAGIC
    unz = zlib.decompressobj(16 + zlib.MAX_WBITS) if gz else None
    h, size = hashlib.sha256(), 0
    fd, tmp = tempfile.mkstemp(dir=dest_dir, prefix=f".{key}.", suffix=".harvest")
    try:
        os.fchmod(fd, 0o644)  # as the node wrote it (mkstemp makes 0600)
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while chunk := f.read(CHUNK):
                        for piece in (_inflate(unz, chunk, key) if unz is not None else (chunk,)):
                            size += len(piece)
                            if unz is not None and size > max_size:
                                raise HarvestError(f"{key}: the parts' gzip stream inflates past {max_size} bytes:"
                                                   " not a product of ours", 1)
                            h.update(piece)
                            out.write(piece)
            if unz is not None and not (unz.eof and not unz.unused_data):
                raise HarvestError(f"{key}: the parts' gzip stream is cut short or has bytes after its end", 1)
    except zlib.error as e:
        os.unlink(tmp)
        raise HarvestError(f"{key}: the parts' gzip stream does not decompress ({e})", 1) from None
    except BaseException:
        os.unlink(tmp)
        raise
    return Path(tmp), h.hexdigest(), size


def _inflate(unz, data: bytes, key: str):
    """``data`` inflated by ``unz`` in pieces of at most CHUNK bytes."""
    while data:
        if unz.eof:
            raise HarvestError(f"{key}: bytes after the end of the parts' gzip stream", 1)
        yield unz.decompress(data, CHUNK)
        data = unz.unconsumed_tail


def check_wheel(path: Path, key: str) -> None:
    """HarvestError 1 unless ``path`` opens as a zip with a ``*.dist-info/RECORD`` entry."""
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
    except (zipfile.BadZipFile, OSError) as e:
        raise HarvestError(f"{key}: the joined wheel does not open as a zip ({e})", 1) from None
    if not any(RECORD.match(n) for n in names):
        raise HarvestError(f"{key}: the joined wheel has no *.dist-info/RECORD entry", 1)


def check_tree_archive(path: Path, key: str) -> None:
    """HarvestError 1 unless ``path`` passes the checks the node's restore makes of an archive
    before it writes anything (``treecache.check_archive``: plain files and folders under relative
    paths, none twice, the files' times well-formed), so that a bad archive is refused here, not
    on a leased GPU node."""
    try:
        check_archive(str(path))
    except (tarfile.TarError, OSError, TreeCacheError) as e:
        raise HarvestError(f"{key}: the joined {TREE_ARCHIVE} is not an archive treecache restores ({e})", 1) from None


def check_product(path: Path, key: str, name: str) -> None:
    (check_tree_archive if name == TREE_ARCHIVE else check_wheel)(path, key)


def cached_state(h: Harvest, folder: Path, replace: bool) -> str | None:
    """``"present"`` when the cache holds exactly this file; None when it may be seeded; HarvestError 1
    when it holds another product for the key and ``replace`` is off."""
    held = cached_artifacts(folder)
    if [w.name for w in held] == [h.file] and sha256_file(held[0]) == h.sha256:
        return "present"
    if held and not replace:
        raise HarvestError(f"{h.key}: the cache already holds {', '.join(w.name for w in held)} in {folder}, "
                           f"not {h.file} {h.sha256[:12]}... (--replace to put this one instead)", 1)
    return None


def seed(h: Harvest, cache: Path, folders: list[Path], replace: bool) -> dict:
    """Check and place one KEY's product; the result row. HarvestError 1 with nothing written."""
    dest = cache / h.key
    row = {"key": h.key, "file": h.file, "sha256": h.sha256}
    if cached_state(h, dest, replace) == "present":
        return {**row, "status": "present", "size": (dest / h.file).stat().st_size}
    parts = part_paths(h)
    cache.mkdir(parents=True, exist_ok=True)
    tmp, sha, size = join_parts(parts, cache, h.key)
    try:
        if sha != h.sha256:
            raise HarvestError(f"{h.key}: the {len(parts)} joined parts have sha256 {sha}, "
                               f"{h.key}{SHA_SUFFIX} says {h.sha256}", 1)
        check_product(tmp, h.key, h.file)
        dest.mkdir(exist_ok=True)
        os.replace(tmp, dest / h.file)
    finally:
        if tmp.exists():
            tmp.unlink()
    for other in cached_artifacts(dest):  # --replace: the bundle packs the first product of the folder
        if other.name != h.file:
            other.unlink()
    info = {"key": h.key, "file": h.file, "sha256": sha, "size": size,
            "from": [str(f.resolve()) for f in folders],
            "harvested_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    write_atomic(dest / "harvest.json", json.dumps(info, indent=2) + "\n", mode=0o644)
    return {**row, "status": "seeded", "size": size, "parts": len(parts)}


def line(row: dict) -> str:
    if row["status"] == "seeded":
        return (f"{row['key']}: seeded {row['file']} ({row['size']} bytes, sha256 {row['sha256'][:8]}...) "
                f"from {row['parts']} parts")
    return (f"{row['key']}: the cache already holds {row['file']} ({row['size']} bytes, "
            f"sha256 {row['sha256'][:8]}...); nothing done")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path, metavar="FOLDER", help="a harvested $OUT/prebuilt folder")
    ap.add_argument("--cache", type=Path, default=None,
                    help="the build cache (default $ENVBUILD_HOME/cache/wheels)")
    ap.add_argument("--replace", action="store_true", help="put the file in place of another product the cache holds")
    ap.add_argument("--json", action="store_true", help="a JSON list of the keys' results")
    a = ap.parse_args(argv)
    cache = a.cache if a.cache is not None else rundir.envbuild_home() / "cache" / "wheels"
    try:
        harvests = gather(a.folders)
    except (HarvestError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return getattr(e, "code", 2)
    rows, code = [], 0
    for h in harvests:
        try:
            rows.append(seed(h, cache, a.folders, a.replace))
        except (HarvestError, OSError) as e:
            rows.append({"key": h.key, "file": h.file, "sha256": h.sha256, "status": "failed", "error": str(e)})
            code = max(code, getattr(e, "code", 1))
            print(f"error: {e}", file=sys.stderr)
    if a.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            if row["status"] != "failed":
                print(line(row))
    return code


if __name__ == "__main__":
    sys.exit(main())
