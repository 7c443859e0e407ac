"""One provisioned environment packed into one file, to be copied to many nodes and unpacked
there, instead of installing on every node (issue 38: build once, pack once).

``pack(prefix, out)`` writes ``out`` (a gzip'd tar of the prefix's files, names relative to
the prefix) and ``out.json`` (``PackedEnv``: the file's sha256 and size, the prefix it must be
unpacked at, and the step markers it was made from: which plan steps had run there, with their
digests). A venv or conda prefix holds its own absolute path (scripts' ``#!`` lines,
``pyvenv.cfg``), so a pack is unpacked at the same path on every node (a node-local disk such
as ``/local/scratch`` mounted alike everywhere); relocating it is not done. The prefix's
temporary folder and its lock file are left out. Both files are written whole or not at all.
How a pack reaches the nodes is the scheduler's (``envbuild.launch.slurm``: ``sbcast``, then
every node checks the sha256 before unpacking).
"""

from __future__ import annotations

import json
import os
import tarfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from envbuild.errors import InputError
from envbuild.fsio import sha256_file

SCHEMA = "envbuild.pack/1"
LEFT_OUT = (".envbuild/tmp", ".envbuild/prefix.lock")


@dataclass(frozen=True)
class PackedEnv:
    archive: str  # the pack's path on the controller (or the submit host's shared file system)
    sha256: str
    bytes: int
    prefix: str  # where it unpacks, the same on every node
    steps: dict[str, str] = field(default_factory=dict)  # step id -> marker digest, at pack time
    schema: str = SCHEMA

    def manifest(self) -> dict:
        return asdict(self)


def manifest_path(archive: Path) -> Path:
    return archive.with_name(archive.name + ".json")


def _markers(prefix: Path) -> dict[str, str]:
    state = prefix / ".envbuild" / "state"
    return {p.name[:-len(".done")]: p.read_text().strip() for p in sorted(state.glob("*.done"))} \
        if state.is_dir() else {}


def pack(prefix: Path, out: Path) -> PackedEnv:
    """Pack the environment at ``prefix`` into ``out`` (+ ``out.json``); InputError when the
    prefix holds no environment envbuild made (no ``.envbuild/env.sh``)."""
    prefix = Path(os.path.abspath(prefix))
    if not (prefix / ".envbuild" / "env.sh").is_file():
        raise InputError(f"{prefix} holds no environment envbuild made (no .envbuild/env.sh)",
                         hint="provision it first: envbuild provision RECIPE --prefix PREFIX")
    out = Path(os.path.abspath(out))
    if out == prefix or prefix in out.parents:
        raise InputError(f"{out} is inside the prefix it packs", hint="write the pack elsewhere")
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with tarfile.open(tmp, "w:gz", compresslevel=6) as tar:
            for path in sorted(prefix.rglob("*")):
                rel = path.relative_to(prefix).as_posix()
                if any(rel == x or rel.startswith(x + "/") for x in LEFT_OUT):
                    continue
                tar.add(path, arcname=rel, recursive=False)
        packed = PackedEnv(archive=str(out), sha256=sha256_file(tmp), bytes=tmp.stat().st_size,
                           prefix=str(prefix), steps=_markers(prefix))
        man = manifest_path(out)
        man_tmp = man.with_name(f".{man.name}.{os.getpid()}.tmp")
        man_tmp.write_text(json.dumps(packed.manifest(), indent=1, sort_keys=True) + "\n")
        os.replace(tmp, out)
        os.replace(man_tmp, man)
    finally:
        for leftover in (tmp, manifest_path(out).with_name(f".{manifest_path(out).name}.{os.getpid()}.tmp")):
            leftover.unlink(missing_ok=True)
    return packed


def read(archive: Path) -> PackedEnv:
    """The pack at ``archive`` as its manifest says, after checking the file's sha256 against it
    (InputError naming the file when it is missing, unreadable or changed)."""
    archive = Path(os.path.abspath(archive))
    man = manifest_path(archive)
    try:
        data = json.loads(man.read_text())
        packed = PackedEnv(**{**data, "archive": str(archive)})
    except FileNotFoundError:
        raise InputError(f"{man}: no manifest beside the pack", hint="make packs with envbuild pack") from None
    except (ValueError, TypeError) as exc:
        raise InputError(f"{man}: not a pack manifest ({exc})") from None
    if packed.schema != SCHEMA:
        raise InputError(f"{man}: schema {packed.schema!r}, this envbuild reads {SCHEMA}")
    if not archive.is_file():
        raise InputError(f"{archive}: no such pack")
    if sha256_file(archive) != packed.sha256:
        raise InputError(f"{archive}: its sha256 differs from the one {man.name} recorded",
                         hint="the pack changed since envbuild pack wrote it: pack it again")
    return packed
