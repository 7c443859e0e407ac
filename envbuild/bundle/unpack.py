"""Open a bundle on the controller: unpack, verify every file against the manifest, and say
what the plan may take from it.

``open_bundle(FILE)`` refuses, before anything is installed anywhere:

- a file that is not a tar, or a tar holding anything but regular files and folders under
  relative paths (InputError, exit 2);
- content that does not match the manifest: a changed byte, a file the manifest names that is
  missing, a file the manifest does not name (InputError, exit 2, every problem listed);

and ``Opened.check_plan(plan)`` refuses a consistent bundle that lacks what a node's plan
needs (a distribution, a pinned commit, a git dependency of a source install, a submodule its
options read, a data file; for the container backend, every wheel its image build installs),
or a plan that needs the network anyway (system packages, a conda channel, and in an image
build apt, a git remote or a data URL: ``envbuild.bundle.network``): CheckFailed, exit 1,
naming each missing item. A base image the bundle does not carry is not refused there: the
node may hold it already (the manifest's ``offline: no`` said so when the bundle was made).

The bundle is unpacked once per content digest into ``$ENVBUILD_HOME/bundles/<digest[:16]>``
(a second provision from the same bundle plans the same paths, so its steps are unchanged)
and verified again every time it is opened.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from envbuild import rundir
from envbuild.bundle.buildcache import cached_artifacts
from envbuild.bundle.manifest import MANIFEST, NODE_DIR, Manifest, verify_tree
from envbuild.errors import CheckFailed, InputError
from envbuild.fsio import sha256_file
from envbuild.lock import read_lock
from envbuild.lock.schema import normalize
from envbuild.plan.params import (BundleParams, DataParams, GitSourceParams, ImageParams, PipInstallParams,
                                  PipToolingParams, StagedFile)


@dataclass(frozen=True)
class Opened:
    """A verified, unpacked bundle."""

    file: Path
    digest: str  # sha256 of the bundle file
    root: Path  # the unpacked folder on the controller
    manifest: Manifest

    @property
    def lock_file(self) -> Path:
        return self.root / "lock.lock"

    @property
    def recipe_file(self) -> Path:
        return self.root / "recipe.yaml"

    def stage_params(self):
        """The plan's ``bundle`` step (the planner puts it at ``<prefix>/.envbuild/bundle``)."""
        cut = len(NODE_DIR) + 1
        files = [StagedFile(name=f.path[cut:], sha256=f.sha256, size=f.size)
                 for f in self.manifest.files if f.path.startswith(NODE_DIR + "/")]
        # the node/ folder's archive sits beside the unpacked tree, never in it (the tree must
        # hold exactly what the manifest lists)
        return BundleParams(digest=self.digest, src=str(self.root / NODE_DIR), files=files,
                            archive=str(node_archive(self.root)),
                            git={g.url: g.path[cut:] for g in reversed(self.manifest.git)},
                            git_commits={f"{g.url}@{g.sha}": g.path[cut:] for g in reversed(self.manifest.git)},
                            images={i.name: i.path[cut:] for i in self.manifest.images})

    def seed_build_cache(self, cache: Path) -> list[str]:
        """Put the bundle's prebuilt extension wheels and archives of build outputs into the
        controller's build cache (``<cache>/<key>/``) unless one is there already; returns the
        keys seeded."""
        seeded = []
        for f in self.manifest.files:
            if f.kind != "prebuilt" or not f.name:
                continue
            dest = cache / f.name
            if not dest.resolve().is_relative_to(cache.resolve()):  # the manifest refuses it; twice is cheap
                raise InputError(f"{self.file}: prebuilt key {f.name!r} leaves the build cache",
                                 hint="this is not a bundle made by `envbuild bundle`; nothing was written")
            if cached_artifacts(dest):
                continue
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.root / f.path, dest / PurePosixPath(f.path).name)
            seeded.append(f.name)
        return seeded

    def prebuilt_not_used(self, cache: Path) -> list[str]:
        """The carried keys whose ``<cache>/<key>/`` holds anything but the carried wheel's bytes
        (another wheel or archive, or several): the provision pushes the cache's, not the bundle's."""
        out = []
        for f in self.manifest.files:
            if f.kind == "prebuilt" and f.name:
                wheels = cached_artifacts(cache / f.name)
                if len(wheels) != 1 or sha256_file(wheels[0]) != f.sha256:
                    out.append(f.name)
        return sorted(out)

    def check_plan(self, plan) -> None:
        """CheckFailed naming everything ``plan`` needs that the bundle does not carry."""
        have = {(normalize(f.name or ""), f.version) for f in self.manifest.dists()}
        names = {normalize(f.name or "") for f in self.manifest.dists()}
        missing: list[str] = []
        from envbuild.bundle.network import needs

        missing += [f"step {n.step.split(': ', 1)[-1]}: {n.kind} {n.what} (needs the network: {n.why})"
                    for n in needs([plan], [i.name for i in self.manifest.images]) if n.kind != "base-image"]
        for step in plan.steps:
            if isinstance(step.params, ImageParams):  # the container backend: the wheels its build installs --no-index
                missing += [f"step {step.id}: {r.name} {r.version} for the image build (no such file in the bundle)"
                            for s in step.params.image.plan.requirement_installs()
                            for r in s.params.requirements if (normalize(r.name), r.version) not in have]
            if isinstance(step.params, (PipToolingParams, PipInstallParams)):
                for r in step.params.requirements:
                    key = normalize(r.name)
                    if (key, r.version) in have:
                        continue
                    if r.version[:1].isdigit() or key not in names:
                        missing.append(f"step {step.id}: {r.name} {r.version} (no such file in the bundle)")
            if isinstance(step.params, GitSourceParams):
                # per commit, not per URL: two sources of one repository may pin two commits
                carried = [g for g in self.manifest.git if g.url == step.params.url]
                if not any(g.sha == step.params.sha for g in carried):
                    got = ("it carries " + ", ".join(f"{g.sha[:12]} for {g.name}" for g in carried)
                           if carried else "not in the bundle")
                    dep = self._dependency_of(step.params.name, step.params.url)
                    missing.append(f"step {step.id}: {step.params.url} @ {(step.params.sha or step.params.ref)[:12]} "
                                   + (f"(git dependency {step.params.name} of {dep}: {got})" if dep else f"({got})"))
                pinned = {g.name for g in self.manifest.git}
                missing += [f"step {step.id}: submodule {path} of {step.params.name} (not in the bundle)"
                            for path in step.params.submodules if f"{step.params.name}:{path}" not in pinned]
            if isinstance(step.params, DataParams):
                names = {f.name for f in self.manifest.files if f.kind == "data"}
                missing += [f"step {step.id}: data file {f.name} (not in the bundle)"
                            for f in step.params.files if f.name not in names]
        if missing:
            raise CheckFailed(f"the bundle {self.file.name} lacks {len(missing)} thing(s) the plan for "
                              f"{plan.host} needs:\n  - " + "\n  - ".join(missing),
                              hint="make the bundle with the same recipe, target and lock as this provision "
                                   "(envbuild bundle ... --facts FILE of these nodes)")

    def _dependency_of(self, name: str, url: str) -> str | None:
        """``"ezpz"`` when the bundle's lock pins ``name`` as a git dependency of source installs."""
        pin = read_lock(self.lock_file).git_pin(name) if self.lock_file.is_file() else None
        return ", ".join(pin.required_by) if pin is not None and pin.url == url and pin.required_by else None

    def summary(self) -> dict:
        """What run.json records about the bundle."""
        return {"file": str(self.file), "digest": self.digest, "offline": self.manifest.is_offline,
                "recipe": self.manifest.recipe, "target": self.manifest.target,
                "lock_digest": self.manifest.lock_digest, "files": len(self.manifest.files),
                "bytes": self.file.stat().st_size,
                "omitted": [o.model_dump() for o in self.manifest.omitted],
                "prebuilt": sorted({f.name for f in self.manifest.files if f.kind == "prebuilt" and f.name})}


def _members(tar: tarfile.TarFile, file: Path) -> list[tarfile.TarInfo]:
    out = []
    for m in tar.getmembers():
        p = PurePosixPath(m.name)
        if p.is_absolute() or ".." in p.parts or not m.name or m.name.startswith("./.."):
            raise InputError(f"{file}: member {m.name!r} is not a relative path inside the bundle",
                             hint="this is not a bundle made by `envbuild bundle`")
        if not (m.isfile() or m.isdir()):
            raise InputError(f"{file}: member {m.name!r} is not a regular file or folder",
                             hint="this is not a bundle made by `envbuild bundle`")
        out.append(m)
    return out


def _why(exc: Exception) -> str:
    """A manifest's first problem, naming its field (``files.12: ...``)."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError) and exc.errors():
        e = exc.errors()[0]
        return ".".join(str(x) for x in e["loc"]) + ": " + e["msg"]
    return str(exc).splitlines()[0]


def _read_manifest(root: Path, file: Path) -> Manifest:
    from pydantic import ValidationError

    path = root / MANIFEST
    if not path.is_file():
        raise InputError(f"{file}: no {MANIFEST} in the bundle", hint="make it with `envbuild bundle`")
    try:
        return Manifest.model_validate(json.loads(path.read_text()))
    except (ValueError, ValidationError) as exc:
        raise InputError(f"{file}: {MANIFEST} is not a bundle manifest: {_why(exc)}",
                         hint="make the bundle again with `envbuild bundle`") from None


MAX_MANIFEST = 64 * 2**20  # a manifest larger than this is not one `envbuild bundle` wrote
MAX_PEEK = 16 * 2**20  # a lock or a manifest read before unpacking: no larger


def peek(file: Path, names: tuple[str, ...]) -> dict[str, bytes]:
    """The bytes of the members ``names`` of the bundle, read into memory without unpacking
    anything (each at most ``MAX_PEEK``; a member missing is left out). InputError for a file
    that is not a readable tar."""
    out: dict[str, bytes] = {}
    try:
        with tarfile.open(file) as tar:
            for member in tar:
                if member.name in names and member.isfile() and member.name not in out:
                    if member.size > MAX_PEEK:
                        raise InputError(f"{file}: {member.name} is {member.size} bytes, not a bundle's",
                                         hint="make it with `envbuild bundle`; nothing was unpacked")
                    fh = tar.extractfile(member)
                    out[member.name] = fh.read() if fh else b""
                    if len(out) == len(names):
                        break
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise InputError(f"{file}: not a readable bundle: {exc}", hint="make it with `envbuild bundle`") from None
    return out


def _declared(tar: tarfile.TarFile, members: list[tarfile.TarInfo], file: Path) -> None:
    """Refuse, before a byte is written, a member the manifest does not name or whose size is
    not the manifest's (with the free-space check in ``_unpack``: a small compressed file never
    expands into gigabytes on disk; the sha256 of each file is checked after unpacking)."""
    man = next((m for m in members if PurePosixPath(m.name).as_posix() == MANIFEST), None)
    if man is None or man.size > MAX_MANIFEST:
        raise InputError(f"{file}: no readable {MANIFEST} in the bundle", hint="make it with `envbuild bundle`")
    raw = tar.extractfile(man)
    try:
        manifest = Manifest.model_validate(json.loads(raw.read() if raw else b""))
    except (ValueError, TypeError) as exc:
        raise InputError(f"{file}: {MANIFEST} is not a bundle manifest: {_why(exc)}; nothing was unpacked",
                         hint="make the bundle again with `envbuild bundle`") from None
    sizes = {f.path: f.size for f in manifest.files}
    bad = []
    for m in members:
        name = PurePosixPath(m.name).as_posix()
        if m.isfile() and name != MANIFEST and (name not in sizes or m.size != sizes[name]):
            bad.append(f"{name}: {m.size} bytes" + (", not in the manifest" if name not in sizes
                                                     else f", the manifest says {sizes[name]}"))
    if bad:
        raise InputError(f"{file}: the bundle does not match its manifest ({len(bad)} problem(s)):\n  - "
                         + "\n  - ".join(bad[:20]), hint="the bundle was changed after `envbuild bundle` made it; "
                         "nothing was unpacked")


def node_archive(root: Path) -> Path:
    """The tar of an unpacked bundle's ``node/`` folder (``Opened.stage_params``): beside the
    tree, never in it, and removed whenever the tree is."""
    return root.with_name(root.name + ".node.tar")


def _unpack(file: Path, dest: Path) -> None:
    part = dest.with_name(dest.name + ".partial")
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir(parents=True)
    try:
        with tarfile.open(file, "r:*") as tar:
            members = _members(tar, file)
            _declared(tar, members, file)
            total = sum(m.size for m in members if m.isfile())
            if total > shutil.disk_usage(part).free:
                raise InputError(f"{file}: unpacks to {total} bytes, more than the free space under {part.parent}",
                                 hint="free space first; nothing was unpacked")
            tar.extractall(part, members=members, filter="data")
    except InputError:
        shutil.rmtree(part, ignore_errors=True)
        raise
    except (tarfile.TarError, EOFError, OSError) as exc:
        shutil.rmtree(part, ignore_errors=True)
        raise InputError(f"{file}: not a readable bundle: {exc}", hint="make it with `envbuild bundle`") from None
    shutil.rmtree(dest, ignore_errors=True)
    node_archive(dest).unlink(missing_ok=True)
    os.replace(part, dest)


def open_bundle(file: str | Path, home: Path | None = None, expect_sha256: str | None = None) -> Opened:
    """Unpack ``file`` (once per digest) and verify all of it; see the module docstring.
    ``expect_sha256`` (``--bundle-sha256``): the file's digest must be this one, checked before
    a byte is unpacked (CheckFailed, exit 1)."""
    path = Path(file)
    if not path.is_file():
        raise InputError(f"--bundle {file}: no such file", hint="give the file `envbuild bundle -o` wrote")
    digest = sha256_file(path)
    if expect_sha256 is not None and digest != expect_sha256.strip().lower():
        raise CheckFailed(f"--bundle {path}: its sha256 is {digest}, not the pinned {expect_sha256}",
                          hint="this is not the bundle you pinned: use the file `envbuild bundle` printed "
                               "that digest for; nothing was unpacked")
    root = (home or rundir.envbuild_home()) / "bundles" / digest[:16]
    if not (root / MANIFEST).is_file():
        _unpack(path, root)
    manifest = _read_manifest(root, path)
    problems = verify_tree(root, manifest)
    if problems:
        shutil.rmtree(root, ignore_errors=True)  # never plan from a tree that failed once
        node_archive(root).unlink(missing_ok=True)
        raise InputError(f"{path}: the bundle does not match its manifest ({len(problems)} problem(s)):\n  - "
                         + "\n  - ".join(problems[:20]) + (f"\n  - ... and {len(problems) - 20} more"
                                                           if len(problems) > 20 else ""),
                         hint="the bundle was changed or damaged after `envbuild bundle` made it; "
                              "make it again, nothing was installed")
    return Opened(file=path, digest=digest, root=root, manifest=manifest)

