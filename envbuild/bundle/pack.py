"""``envbuild bundle``: pack what one recipe's lock names for one target into one tar file.

The plan decides what goes in: each distribution a pip step of the plan installs (torch, the
locked packages, the build tooling), each git source the plan checks out, and each Apex wheel
step whose wheel the controller's build cache already holds (same cache key as the plan's).
Packages the plan does not install (``preinstalled`` in the recipe, ``provided_by`` in the
lock: a module's or the node's own torch) are recorded under ``omitted`` and not packed.

The tar is deterministic for the same inputs (sorted members, mtime 0, uid/gid 0), gzip when
the output name ends in ``.gz`` / ``.tgz``. Nothing is packed unless every file hashed as the
lock says (``envbuild.bundle.fetch``).
"""

from __future__ import annotations

import gzip
import json
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from envbuild import __version__
from envbuild.bundle import gitpack
from envbuild.bundle.fetch import fetch_dist
from envbuild.bundle.manifest import (GIT, MANIFEST, PREBUILT, WHEELS, BundleFile, GitPin,
                                      Manifest, Omitted, sha256_file, tree_files)
from envbuild.errors import CheckFailed, EnvironmentProblem, InputError
from envbuild.lock.schema import Lock, normalize
from envbuild.plan.model import Plan
from envbuild.recipes.schema import Recipe

Progress = Callable[[str], None]
PLAYBOOKS = Path(__file__).resolve().parents[1] / "ansible"  # packed as playbooks/ (its collection copied, links resolved)


@dataclass
class Packed:
    """What ``make_bundle`` wrote: the file, its sha256 and size, and the manifest."""

    path: Path
    sha256: str
    size: int
    manifest: Manifest
    origins: dict[str, str] = field(default_factory=dict)  # file -> wheelhouse|cache|download


def planned_requirements(plan: Plan) -> list[tuple[str, str]]:
    """``(name, version)`` of every distribution the plan's pip steps install, in plan order."""
    out: list[tuple[str, str]] = []
    for step in plan.steps:
        if step.kind in ("pip_tooling", "pip_install"):
            out += [(r.name, r.version) for r in step.params.requirements]
    return out


def _lock_entry(lock: Lock, name: str, version: str):
    key = normalize(name)
    for entry in [*lock.tooling, *lock.packages]:
        if normalize(entry.name) == key and (entry.version == version or
                                             entry.version.split("+")[0] == version.split("+")[0]):
            return entry
    return None


def omitted(lock: Lock, plan: Plan) -> list[Omitted]:
    """Lock entries the plan does not install, and why (the node provides them)."""
    planned = {normalize(n) for n, _ in planned_requirements(plan)}
    out = []
    for entry in lock.packages:
        if normalize(entry.name) in planned:
            continue
        why = (f"provided by {entry.provided_by}" if entry.provided_by
               else "preinstalled on the node" if entry.source == "preinstalled"
               else "not installed by the plan")
        out.append(Omitted(name=entry.name, why=why))
    return out


def make_bundle(recipe: Recipe, recipe_file: Path, target_file: Path | None, lock: Lock, lock_text: str,
                plan: Plan, out: Path, *, wheelhouse: Path | None = None, git_mirror: Path | None = None,
                build_cache: Path | None = None, progress: Progress | None = None) -> Packed:
    """Write the bundle of ``plan`` (built from ``recipe``, ``lock``) to ``out``."""
    say = progress or (lambda _m: None)
    if lock.recipe.name != recipe.name:
        raise InputError(f"the lock is for recipe {lock.recipe.name}, not {recipe.name}")
    with tempfile.TemporaryDirectory(prefix="envbuild-bundle-") as tmp:
        root = Path(tmp) / "b"
        root.mkdir()
        files: list[BundleFile] = []
        origins: dict[str, str] = {}

        # distributions, each hash-checked against the lock
        wheels = root / WHEELS
        wheels.mkdir(parents=True)
        seen: set[str] = set()
        for name, version in planned_requirements(plan):
            entry = _lock_entry(lock, name, version)
            if entry is None:
                raise CheckFailed(f"the plan installs {name} {version}, which the lock does not name",
                                  hint=f"re-lock: envbuild lock {recipe.name} --target {lock.target.name}")
            if entry.dist is None or entry.dist.filename in seen:
                if entry.dist is None:
                    raise CheckFailed(f"{name} {version}: the lock has no file for it ({entry.reason or 'unresolved'})",
                                      hint="a bundle carries only locked, hashed files")
                continue
            seen.add(entry.dist.filename)
            dest = wheels / entry.dist.filename
            origins[entry.dist.filename] = fetch_dist(entry, dest, wheelhouse)
            say(f"{entry.dist.filename}: {origins[entry.dist.filename]}, sha256 ok")
            files.append(BundleFile(path=f"{WHEELS}/{entry.dist.filename}", sha256=entry.dist.sha256,
                                    size=dest.stat().st_size, kind="dist", name=entry.name,
                                    version=entry.version))

        # git sources: a shallow bare repository per pinned commit
        pins: list[GitPin] = []
        for step in (s for s in plan.steps if s.kind == "git_source"):
            p = step.params
            if not p.sha:
                raise CheckFailed(f"git source {p.name} has no pinned commit",
                                  hint="a bundle carries commits, not branches: pin a sha in the recipe")
            from envbuild.gitsrc import mirror_path

            mirror = mirror_path(p.url, git_mirror) if git_mirror else None
            if mirror is None:
                raise EnvironmentProblem(f"no git mirror of {p.url} for source {p.name}",
                                         hint="pass --git-mirror DIR holding OWNER/NAME or OWNER+NAME")
            rel = f"{GIT}/{p.name}.git"
            gitpack.shallow_repo(mirror, p.sha, p.ref, root / rel)
            pins.append(GitPin(name=p.name, url=p.url, ref=p.ref, sha=p.sha, path=rel))
            say(f"git {p.name} @ {p.sha[:12]}: depth-1 repository from {mirror}")
            for sub in tree_files(root / rel):
                f = root / rel / sub
                files.append(BundleFile(path=f"{rel}/{sub}", sha256=sha256_file(f), size=f.stat().st_size,
                                        kind="git", name=p.name))

        # prebuilt extension wheels from the controller's build cache (same cache key)
        for step in (s for s in plan.steps if s.kind == "apex_build"):
            key = step.params.cache_key
            cached = sorted((build_cache / key).glob("*.whl")) if build_cache else []
            if not cached:
                say(f"{key}: not in the build cache; the node builds it")
                continue
            dest = root / PREBUILT / key / cached[0].name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(cached[0], dest)
            files.append(BundleFile(path=f"{PREBUILT}/{key}/{cached[0].name}", sha256=sha256_file(dest),
                                    size=dest.stat().st_size, kind="prebuilt", name=key))
            say(f"{key}: prebuilt wheel {cached[0].name} from the build cache")

        # the lock, the recipe, the target, the plan, the playbooks
        (root / "lock.lock").write_text(lock_text)
        shutil.copyfile(recipe_file, root / "recipe.yaml")
        metas = [("lock.lock", "lock"), ("recipe.yaml", "recipe"), ("plan.json", "plan")]
        if target_file is not None:
            shutil.copyfile(target_file, root / "target.yaml")
            metas.append(("target.yaml", "target"))
        (root / "plan.json").write_text(plan.to_json())
        shutil.copytree(PLAYBOOKS, root / "playbooks", symlinks=False,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        metas += [(f"playbooks/{p}", "playbook") for p in tree_files(root / "playbooks")]
        for rel, kind in metas:
            f = root / rel
            files.append(BundleFile(path=rel, sha256=sha256_file(f), size=f.stat().st_size, kind=kind))

        from envbuild.plan.build import _lock_digest

        manifest = Manifest(recipe=recipe.name, target=lock.target.name, lock_digest=_lock_digest(lock) or "",
                            envbuild_version=__version__, python=recipe.python, facts_origin=plan.facts_origin,
                            files=sorted(files, key=lambda f: f.path), git=pins, omitted=omitted(lock, plan),
                            needs_network=[f"system packages: {' '.join(s.params.packages)}"
                                           for s in plan.steps if s.kind == "system_packages"])
        (root / MANIFEST).write_text(manifest.to_json())
        _write_tar(root, out)
    return Packed(path=out, sha256=sha256_file(out), size=out.stat().st_size, manifest=manifest,
                  origins=origins)


def _tarinfo(name: str, size: int, mode: int = 0o644) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, mode, 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _write_tar(root: Path, out: Path) -> None:
    """manifest.json first, then every file in path order; gzip for .gz/.tgz names."""
    out.parent.mkdir(parents=True, exist_ok=True)
    part = out.with_name(out.name + ".part")
    names = [MANIFEST] + [p for p in tree_files(root) if p != MANIFEST]
    compress = out.name.endswith((".gz", ".tgz"))
    with open(part, "wb") as raw:
        stream = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=6) if compress else raw
        with tarfile.open(fileobj=stream, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for rel in names:
                f = root / rel
                with open(f, "rb") as fh:
                    tar.addfile(_tarinfo(rel, f.stat().st_size), fh)
        if compress:
            stream.close()
    part.replace(out)


def manifest_summary(manifest: Manifest) -> dict:
    """Counts and sizes per kind, for the command's output."""
    out: dict[str, dict] = {}
    for f in manifest.files:
        row = out.setdefault(f.kind, {"files": 0, "bytes": 0})
        row["files"] += 1
        row["bytes"] += f.size
    return json.loads(json.dumps(out))

