"""One provisioned environment packed into one file, to be copied to many nodes and unpacked
there, instead of installing on every node (issue 38: build once, pack once).

``pack(prefix, out)`` writes ``out`` (a tar of the prefix's files, names relative to the prefix,
compressed with zstd on every core of the packing machine (``tar.zst``, the default), or with gzip on
one thread for a name ending ``.tar.gz``/``.tgz`` (``tar.gz``: what envbuild packed before, for nodes
without the ``zstd`` program); or, for ``fmt="squashfs"`` or a name ending ``.sqsh``/``.squashfs``, a squashfs image
of them made by mksquashfs, which a node mounts read-only at the prefix with squashfuse instead
of unpacking it: one file on the node's disk, its many small files read through one mount, as
sites run pyxis/enroot ``.sqsh`` images and squashfs'd venvs) and ``out.json`` (``PackedEnv``:
the file's sha256 and size, the prefix it must be unpacked at, and the step markers it was made
from: which plan steps had run there, with their digests). A venv or conda prefix holds its own
absolute path (scripts' ``#!`` lines, ``pyvenv.cfg``), so a pack is unpacked at the same path on
every node (a node-local disk such as ``/local/scratch`` mounted alike everywhere); relocating it
is not done. The prefix's temporary folder and its lock file are left out. Both files are written whole or not at all.
How a pack reaches the nodes is the scheduler's (``envbuild.launch.slurm``: ``sbcast``, then
every node checks the sha256 before unpacking, ``tar -I zstd`` for a ``tar.zst``: the node needs the
``zstd`` program, and a node without it fails before its prefix is touched, naming itself;
``envbuild.launch.job.unpack_script``). Why zstd: gzip on one thread was the slow part of building
once; zstd on every core packs cpu-reference smaller, in a fraction of gzip's time and CPU
(bench/pack_speed.py, its figures in bench/results/pack-speed.json).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from envbuild.errors import EnvironmentProblem, InputError
from envbuild.fsio import sha256_file

SCHEMA = "envbuild.pack/1"
LEFT_OUT = (".envbuild/tmp", ".envbuild/prefix.lock")
FORMATS = ("tar.zst", "tar.gz", "squashfs")
SQUASHFS_SUFFIXES = (".sqsh", ".squashfs")
GZIP_SUFFIXES = (".tar.gz", ".tgz")
ZSTD_LEVEL = 3  # zstd's own default: smaller than gzip -6 on cpu-reference (bench/pack_speed.py)
EXTENSIONS = {"tar.zst": "tar.zst", "tar.gz": "tar.gz", "squashfs": "sqsh"}
MKSQUASHFS_TIMEOUT_S = 3600


@dataclass(frozen=True)
class PackedEnv:
    archive: str  # the pack's path on the controller (or the submit host's shared file system)
    sha256: str
    bytes: int
    prefix: str  # where it unpacks, the same on every node
    steps: dict[str, str] = field(default_factory=dict)  # step id -> marker digest, at pack time
    schema: str = SCHEMA
    # tar.zst, tar.gz: unpacked on each node; squashfs: mounted there (squashfuse). A manifest
    # written before tar.zst had no other tarball: one without the field is a tar.gz
    format: str = "tar.gz"

    def manifest(self) -> dict:
        return asdict(self)

    @property
    def image(self) -> bool:
        """A squashfs image: mounted at the prefix, not unpacked."""
        return self.format == "squashfs"

    def node_copy(self) -> str:
        """Where a node keeps its copy: beside the prefix, on the same (node-local) disk."""
        return f"{self.prefix.rstrip('/')}.pack-{self.sha256[:16]}.{EXTENSIONS[self.format]}"


def format_for(out: Path, fmt: str | None) -> str:
    """The pack's format: ``fmt`` when given, else squashfs for a ``.sqsh``/``.squashfs`` name,
    tar.gz for a ``.tar.gz``/``.tgz`` one, else tar.zst; InputError for another format or a name
    that says another one."""
    says = "squashfs" if out.name.endswith(SQUASHFS_SUFFIXES) else "tar.gz" if out.name.endswith(GZIP_SUFFIXES) \
        else "tar.zst" if out.name.endswith((".tar.zst", ".tzst")) else None
    if fmt is None:
        return says or "tar.zst"
    if fmt not in FORMATS:
        raise InputError(f"pack format {fmt!r}: envbuild packs {', '.join(FORMATS)}")
    if says is not None and fmt != says:
        raise InputError(f"{out.name}: the name says {says}, --format says {fmt}",
                         hint="name a zstd tarball .tar.zst, a gzip one .tar.gz and a squashfs image .sqsh")
    return fmt


def manifest_path(archive: Path) -> Path:
    return archive.with_name(archive.name + ".json")


def _markers(prefix: Path) -> dict[str, str]:
    state = prefix / ".envbuild" / "state"
    return {p.name[:-len(".done")]: p.read_text().strip() for p in sorted(state.glob("*.done"))} \
        if state.is_dir() else {}


def _members(prefix: Path, tar: tarfile.TarFile) -> None:
    for path in sorted(prefix.rglob("*")):
        rel = path.relative_to(prefix).as_posix()
        if any(rel == x or rel.startswith(x + "/") for x in LEFT_OUT):
            continue
        tar.add(path, arcname=rel, recursive=False)


def _tar_gz(prefix: Path, tmp: Path) -> None:
    with tarfile.open(tmp, "w:gz", compresslevel=6) as tar:
        _members(prefix, tar)


def _tar_zst(prefix: Path, tmp: Path) -> None:
    """The same tar as ``_tar_gz``'s, streamed through zstd with one worker thread per core
    (libzstd compresses the stream in jobs of a few MB each, in parallel; one frame, which any
    ``zstd -d`` reads)."""
    import zstandard

    zstd = zstandard.ZstdCompressor(level=ZSTD_LEVEL, threads=-1, write_checksum=True)
    # tarfile's stream mode ("w|") joins its writes into one growing bytes object: 10 of the 11 s
    # of CPU a pack of cpu-reference took; its plain mode writes each block straight through
    with open(tmp, "wb") as raw, zstd.stream_writer(raw, closefd=False) as out, \
            tarfile.open(fileobj=out, mode="w", copybufsize=1 << 20) as tar:
        _members(prefix, tar)


def _squashfs(prefix: Path, tmp: Path) -> None:
    """mksquashfs of the prefix (gzip, which every squashfuse reads; no extended attributes; the
    left-out paths excluded; no progress bar): EnvironmentProblem when it is missing or fails."""
    tool = shutil.which("mksquashfs")
    if tool is None:
        raise EnvironmentProblem("mksquashfs is not installed here: a squashfs pack needs it",
                                 hint="apt-get install squashfs-tools, or pack a .tar.gz")
    argv = [tool, str(prefix), str(tmp), "-noappend", "-no-progress", "-quiet", "-comp", "gzip", "-no-xattrs",
            "-e", *LEFT_OUT]
    proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=MKSQUASHFS_TIMEOUT_S)
    if proc.returncode != 0:
        raise EnvironmentProblem(f"mksquashfs {prefix} failed (rc {proc.returncode}): "
                                 f"{(proc.stderr or proc.stdout).strip()[-400:]}")


def pack(prefix: Path, out: Path, fmt: str | None = None) -> PackedEnv:
    """Pack the environment at ``prefix`` into ``out`` (+ ``out.json``) as ``format_for(out,
    fmt)``; InputError when the prefix holds no environment envbuild made (no
    ``.envbuild/env.sh``)."""
    prefix = Path(os.path.abspath(prefix))
    if not (prefix / ".envbuild" / "env.sh").is_file():
        raise InputError(f"{prefix} holds no environment envbuild made (no .envbuild/env.sh)",
                         hint="provision it first: envbuild provision RECIPE --prefix PREFIX")
    out = Path(os.path.abspath(out))
    if out == prefix or prefix in out.parents:
        raise InputError(f"{out} is inside the prefix it packs", hint="write the pack elsewhere")
    kind = format_for(out, fmt)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        {"squashfs": _squashfs, "tar.gz": _tar_gz, "tar.zst": _tar_zst}[kind](prefix, tmp)
        packed = PackedEnv(archive=str(out), sha256=sha256_file(tmp), bytes=tmp.stat().st_size,
                           prefix=str(prefix), steps=_markers(prefix), format=kind)
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
    if packed.format not in FORMATS:
        raise InputError(f"{man}: format {packed.format!r}, envbuild packs {', '.join(FORMATS)}")
    if not archive.is_file():
        raise InputError(f"{archive}: no such pack")
    if sha256_file(archive) != packed.sha256:
        raise InputError(f"{archive}: its sha256 differs from the one {man.name} recorded",
                         hint="the pack changed since envbuild pack wrote it: pack it again")
    return packed


def statement(packed: PackedEnv, *, envbuild_version: str, envbuild_commit: str | None, started: str, finished: str,
              valid_days: float | None = None) -> dict:
    """The pack's in-toto statement (pure; ``envbuild.bundle.provenance``, build type
    ``urn:envbuild:pack:v1``), signed by ``envbuild.flows.signing``: its subject the pack's
    sha256, its parameters what the manifest says of it (prefix, format, size, step markers), so
    that a manifest changed beside a signed pack is refused too (``trusted``)."""
    from envbuild.bundle import provenance as P

    return P.statement(Path(packed.archive).name, packed.sha256, recipe="", target="", lock_digest="",
                       inputs={}, git=[], envbuild_version=envbuild_version, envbuild_commit=envbuild_commit,
                       started=started, finished=finished, build_type=P.PACK_BUILD_TYPE,
                       parameters=signed_fields(packed),
                       valid_days=P.DEFAULT_VALID_DAYS if valid_days is None else valid_days)


def signed_fields(packed: PackedEnv) -> dict:
    """What a pack's statement vouches for besides its bytes."""
    return {"prefix": packed.prefix, "format": packed.format, "bytes": packed.bytes, "steps": dict(packed.steps)}


def trusted(archive: Path, keys: list[Path], envelope: Path | None = None) -> PackedEnv:
    """``read(archive)`` once a key of ``keys`` is shown to have signed the pack's statement
    (its subject the file's sha256) and the statement says what the manifest says (prefix,
    format, size, markers): CheckFailed (exit 1) otherwise, before anything is submitted."""
    from envbuild.bundle import provenance as P
    from envbuild.errors import CheckFailed

    archive = Path(os.path.abspath(archive))
    stmt = P.verify(archive, envelope or P.envelope_path(archive), keys, kind="pack")
    packed = read(archive)
    said = {k: v for k, v in stmt["predicate"]["buildDefinition"]["externalParameters"].items()
            if k in signed_fields(packed)}
    if said != signed_fields(packed):
        changed = sorted(k for k in signed_fields(packed) if said.get(k) != signed_fields(packed)[k])
        raise CheckFailed(f"{manifest_path(archive)}: its {', '.join(changed)} differ from the signed statement's",
                          hint="the manifest beside the pack is not the one its maker signed; nothing was submitted")
    return packed
