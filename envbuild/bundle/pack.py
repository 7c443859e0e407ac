"""``envbuild bundle``: pack what one recipe's lock names for one target into one tar file.

The plans decide what goes in (one per node of the target or the facts file; the union of
what they need): each distribution a pip step installs (torch, the locked packages, the build
tooling), each git source checked out (the git dependencies of source installs that the lock
pins among them: ezpz's ambivalent and enrich) and the submodules its options read (Apex's cutlass for
``--fast_multihead_attn``: the commit the pinned tree records, from the git mirror), each data
file of the recipe's ``data`` section (from ``--data-mirror`` or its URL, its sha256 checked
against the recipe's while packing and recorded in the manifest, so the node checks the copy
it gets), each Apex wheel step whose wheel the controller's build cache already holds
(same cache key as the plan's), and the base image a container recipe's plan needs when given
as its engine saved it (``--image-tar``: ``envbuild.bundle.imagetar``; the node loads it).
The manifest says whether the node needs anything else from the network (``offline``) and what
(``needs_network``: ``envbuild.bundle.network``); with ``offline=True`` a plan that still needs
the network is refused before anything is fetched or written.
Packages the plan does not install (``preinstalled`` in the recipe, ``provided_by`` in the
lock: a module's or the node's own torch) are recorded under ``omitted`` and not packed.

The tar is deterministic for the same inputs (sorted members, mtime 0, uid/gid 0), gzip when
the output name ends in ``.gz`` / ``.tgz``. Nothing is packed unless every file hashed as the
lock says (``envbuild.bundle.fetch``).
"""

from __future__ import annotations

import gzip
import json
import os
import shlex
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from envbuild import __version__
from envbuild.bundle import gitpack
from envbuild.bundle.buildcache import TREE_ARCHIVE, cached_artifacts
from envbuild.bundle.fetch import fetch_data_file, fetch_dist
from envbuild.bundle.manifest import (DATA, GIT, IMAGES, MANIFEST, PREBUILT, WHEELS, BundleFile, CarriedImage,
                                      GitPin, Manifest, NetworkNeed, Omitted, tree_files)
from envbuild.errors import CheckFailed, EnvironmentProblem, InputError
from envbuild.fsio import sha256_file
from envbuild.lock.supply import supply_steps
from envbuild.lock.schema import Lock, normalize
from envbuild.plan.build import PlanOptions
from envbuild.plan.model import Plan
from envbuild.plan.placeholders import inventory_values
from envbuild.plan.resolve import resolve
from envbuild.recipes.schema import Recipe
from envbuild.shipped import PLAYBOOKS

Progress = Callable[[str], None]


@dataclass
class Packed:
    """What ``make_bundle`` wrote: the file, its sha256 and size, and the manifest."""

    path: Path
    sha256: str
    size: int
    manifest: Manifest
    origins: dict[str, str] = field(default_factory=dict)  # file -> wheelhouse|cache|download


def planned_requirements(plan: Plan | list[Plan]) -> list[tuple[str, str]]:
    """``(name, version)`` of every distribution the pip steps of the plan(s) install, in plan
    order, each once."""
    out: list[tuple[str, str]] = []
    for one in (plan if isinstance(plan, list) else [plan]):
        for step in one.requirement_installs():
            out += [(r.name, r.version) for r in step.params.requirements
                    if (r.name, r.version) not in out]
    return out


def _steps(plans: list[Plan], asked: Callable[[Plan], list]) -> list:
    """The steps ``asked`` of every plan (``Plan.sources``...), each distinct step once (first
    plan first)."""
    out, seen = [], set()
    for plan in plans:
        for step in asked(plan):
            key = step.params.model_dump_json()
            if key not in seen:
                seen.add(key)
                out.append(step)
    return out


def _lock_entry(lock: Lock, name: str, version: str):
    key = normalize(name)
    for entry in [*lock.tooling, *lock.packages]:
        if normalize(entry.name) == key and (entry.version == version or
                                             entry.version.split("+")[0] == version.split("+")[0]):
            return entry
    return None


def omitted(lock: Lock, plan: Plan | list[Plan]) -> list[Omitted]:
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


def node_plans(recipe: Recipe, target, facts: list, lock: Lock, prefix: str | None, *,
               smoke: bool = True) -> list[Plan]:
    """The plan of every node (``facts``: one per node), as provision would make them: the
    ``{inventory.*}`` values (MegatronApp's InfiniBand addresses) from all the nodes;
    ``smoke=False`` as ``provision --no-smoke`` plans them (no benchmark; a row about the
    benchmark's run alone, too-few-gpus, warns). CheckFailed naming the node when preflight
    refuses one."""
    inventory = inventory_values(facts)
    plans = [resolve(recipe, target, f, lock,
                     PlanOptions(prefix=prefix, host=f.host, inventory=inventory, smoke=smoke)).plan
             for f in facts]
    for plan in plans:
        if not plan.steps[0].params.feasible:
            raise CheckFailed(f"preflight refuses {recipe.name} on {target.name} ({plan.host}): "
                              f"{plan.steps[0].params.summary}",
                              hint="a bundle is made for nodes that can run the recipe; see envbuild check (for installs "
                                   "without the benchmark on nodes with too few GPUs: --no-smoke)")
    return plans


def mirror_hint(url: str) -> str:
    """The one command that makes the mirror a bundle looks for (OWNER/NAME under --git-mirror)."""
    from envbuild.gitsrc import github_slug

    slug = github_slug(url)
    dest = f"DIR/{slug[0]}/{slug[1]}.git" if slug else "DIR/OWNER/NAME.git"
    return f"on a machine that reaches it: git clone --mirror {shlex.quote(url)} {dest}; then pass --git-mirror DIR"


def supply_hint(recipe: Recipe, lock: Lock, entry, arch: str) -> str:
    """How to supply a locked package whose file this machine could not reach
    (``envbuild.lock.supply``), then bundle with the wheelhouse."""
    return ("a bundle carries only locked, hashed files: "
            + supply_steps(entry, recipe.name, lock.target.name, recipe.python, arch)
            + " and bundle with --wheelhouse WHEELS")


def carried_image(plans: list[Plan], image_tar: Path | None):
    """``(base image name, its SavedImage)`` the ``--image-tar`` archive carries for ``plans``
    (None without one). InputError when no plan needs a base image, or the archive lacks it."""
    if image_tar is None:
        return None
    from envbuild.bundle import imagetar
    from envbuild.bundle.network import base_images

    wanted = base_images(plans)
    if not wanted:
        raise InputError(f"--image-tar {image_tar}: the plan of {plans[0].recipe} on {plans[0].target} runs in "
                         "and builds from no base image", hint="drop --image-tar: only a container recipe's plan "
                                                               "needs its base image")
    return wanted[0], imagetar.find(image_tar, wanted[0])


def refuse_online(needs: list[NetworkNeed], recipe: str, target: str) -> None:
    """``--offline``: CheckFailed (exit 1) naming everything the node would still fetch."""
    if needs:
        raise CheckFailed(f"--offline: a node provisioned from the bundle of {recipe} on {target} would still "
                          f"need the network for {len(needs)} thing(s):\n  - "
                          + "\n  - ".join(n.line() for n in needs) + "\nnothing was written",
                          hint="carry what a bundle can (--image-tar for a base image), or drop --offline to "
                               "write the bundle with offline: no")


def _image_file(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name) + ".tar"


def make_bundle(recipe: Recipe, recipe_file: Path, target_file: Path | None, lock: Lock, lock_text: str,
                plan: Plan | list[Plan], out: Path, *, wheelhouse: Path | None = None,
                git_mirror: Path | None = None, data_mirror: Path | None = None,
                build_cache: Path | None = None, progress: Progress | None = None, arch: str = "x86_64",
                image_tar: Path | None = None, offline: bool = False) -> Packed:
    """Write the bundle of ``plan`` (or of each node's plan: the union of what they need),
    built from ``recipe`` and ``lock``, to ``out`` (``arch``: the target's, for the hints).
    ``image_tar``: the base image as its engine saved it; ``offline``: refuse (CheckFailed, before
    anything is fetched or written) when the node would still need the network."""
    from envbuild.bundle.network import needs as network_needs

    say = progress or (lambda _m: None)
    plans = plan if isinstance(plan, list) else [plan]
    plan = plans[0]
    if lock.recipe.name != recipe.name:
        raise InputError(f"the lock is for recipe {lock.recipe.name}, not {recipe.name}")
    image = carried_image(plans, image_tar)
    needs = network_needs(plans, [image[0]] if image else [])
    if offline:
        refuse_online(needs, recipe.name, lock.target.name)
    with tempfile.TemporaryDirectory(prefix="envbuild-bundle-") as tmp:
        root = Path(tmp) / "b"
        root.mkdir()
        files, origins = _pack_dists(plans, recipe, lock, root, wheelhouse, arch, say)
        git_files, pins = _pack_git(plans, recipe, lock, root, git_mirror, say)
        data_files, data_origins = _pack_data(plans, recipe, root, data_mirror, say)
        files += [*git_files, *data_files, *_pack_prebuilt(plans, root, build_cache, say)]
        origins.update(data_origins)
        images: list[CarriedImage] = []
        if image is not None:
            image_file, carried = _pack_image(image, image_tar, root, say)
            files.append(image_file)
            images.append(carried)
        files += _pack_inputs(root, recipe_file, target_file, lock_text, plans)

        from envbuild.plan.build import _lock_digest

        manifest = Manifest(recipe=recipe.name, target=lock.target.name, lock_digest=_lock_digest(lock) or "",
                            envbuild_version=__version__, python=recipe.python, facts_origin=plan.facts_origin,
                            files=sorted(files, key=lambda f: f.path), git=pins, omitted=omitted(lock, plans),
                            images=images, offline=not needs, needs_network=needs)
        (root / MANIFEST).write_text(manifest.to_json())
        _write_tar(root, out)
    return Packed(path=out, sha256=sha256_file(out), size=out.stat().st_size, manifest=manifest,
                  origins=origins)


def _pack_dists(plans: list[Plan], recipe: Recipe, lock: Lock, root: Path, wheelhouse: Path | None, arch: str,
                say: Progress) -> tuple[list[BundleFile], dict[str, str]]:
    """Every distribution the plans install, each hash-checked against the lock, under ``WHEELS``:
    the files, and where each came from. CheckFailed for one the lock does not name or has no file for."""
    files: list[BundleFile] = []
    origins: dict[str, str] = {}
    wheels = root / WHEELS
    wheels.mkdir(parents=True)
    seen: set[str] = set()
    for name, version in planned_requirements(plans):
        entry = _lock_entry(lock, name, version)
        if entry is None:
            raise CheckFailed(f"the plan installs {name} {version}, which the lock does not name",
                              hint=f"re-lock: envbuild lock {recipe.name} --target {lock.target.name}")
        if entry.dist is None or entry.dist.filename in seen:
            if entry.dist is None:
                raise CheckFailed(f"{name} {version}: the lock has no file for it ({entry.reason or 'unresolved'})",
                                  hint=supply_hint(recipe, lock, entry, arch))
            continue
        seen.add(entry.dist.filename)
        dest = wheels / entry.dist.filename
        origins[entry.dist.filename] = fetch_dist(entry, dest, wheelhouse)
        say(f"{entry.dist.filename}: {origins[entry.dist.filename]}, sha256 ok")
        files.append(BundleFile(path=f"{WHEELS}/{entry.dist.filename}", sha256=entry.dist.sha256,
                                size=dest.stat().st_size, kind="dist", name=entry.name,
                                version=entry.version))
    return files, origins


def _pack_git(plans: list[Plan], recipe: Recipe, lock: Lock, root: Path, git_mirror: Path | None,
              say: Progress) -> tuple[list[BundleFile], list[GitPin]]:
    """A shallow bare repository per pinned commit of the plans' git steps (the recipe's sources
    and the git dependencies of its source installs the lock pins), from the git mirror, with the
    submodules its options read: the files and the pins."""
    from envbuild.gitsrc import mirror_path

    unpinned = [f"{g.name} (git dependency of {', '.join(g.required_by)})" for g in lock.git
                if g.required_by and not g.sha]
    if unpinned:
        raise CheckFailed(f"the lock pins no commit of {', '.join(unpinned)}: a bundle carries commits",
                          hint=f"re-lock with a git mirror that holds them: envbuild lock {recipe.name} "
                               f"--target {lock.target.name} --git-mirror DIR")
    files: list[BundleFile] = []
    pins: list[GitPin] = []
    for step in _steps(plans, Plan.sources):
        p = step.params
        if not p.sha:
            raise CheckFailed(f"git source {p.name} has no pinned commit",
                              hint="a bundle carries commits, not branches: pin a sha in the recipe")
        mirror = mirror_path(p.url, git_mirror) if git_mirror else None
        if mirror is None:
            raise EnvironmentProblem(f"no git mirror of {p.url} for source {p.name}",
                                     hint=mirror_hint(p.url))
        rel = f"{GIT}/{p.name}.git"
        gitpack.shallow_repo(mirror, p.sha, p.ref, root / rel, without=p.without)
        locked = lock.git_pin(p.name)  # a git dependency of source installs: who declares it
        deps_of = locked.required_by if locked is not None and locked.url == p.url else None
        pins.append(GitPin(name=p.name, url=p.url, ref=p.ref, sha=p.sha, path=rel, required_by=deps_of))
        say(f"git {p.name} @ {p.sha[:12]}: depth-1 repository from {mirror}"
            + (f" (git dependency of {', '.join(deps_of)})" if deps_of else ""))
        files += _repo_files(root, rel, p.name)
        if p.submodules:
            files += _pack_submodules(p, mirror, git_mirror, root, pins, say)
    return files, pins


def _pack_submodules(p, mirror: Path, git_mirror: Path | None, root: Path, pins: list[GitPin],
                     say: Progress) -> list[BundleFile]:
    """The submodules of git source ``p`` its options read, at the commits its pinned tree
    records, each from its own mirror (one already in ``pins`` at that commit is not packed
    twice): their files; their pins are added to ``pins``."""
    from envbuild.gitsrc import mirror_path

    files: list[BundleFile] = []
    for path, url, commit in gitpack.submodule_commits(mirror, p.sha, list(p.submodules)):
        if any(g.url == url and g.sha == commit for g in pins):
            continue
        sub_mirror = mirror_path(url, git_mirror)
        if sub_mirror is None:
            raise EnvironmentProblem(f"no git mirror of {url}, the submodule {path} of {p.name}",
                                     hint=mirror_hint(url))
        sub_name = f"{p.name}:{path}"
        sub_rel = f"{GIT}/{p.name}--{path.replace('/', '-')}.git"
        gitpack.shallow_repo(sub_mirror, commit, "pinned", root / sub_rel)
        pins.append(GitPin(name=sub_name, url=url, ref="pinned", sha=commit, path=sub_rel))
        say(f"git {sub_name} @ {commit[:12]}: the submodule's recorded commit from {sub_mirror}")
        files += _repo_files(root, sub_rel, sub_name)
    return files


def _repo_files(root: Path, rel: str, name: str) -> list[BundleFile]:
    """Every file of the packed repository at ``root / rel``, hashed."""
    files = []
    for sub in tree_files(root / rel):
        f = root / rel / sub
        files.append(BundleFile(path=f"{rel}/{sub}", sha256=sha256_file(f), size=f.stat().st_size,
                                kind="git", name=name))
    return files


def _pack_data(plans: list[Plan], recipe: Recipe, root: Path, data_mirror: Path | None,
               say: Progress) -> tuple[list[BundleFile], dict[str, str]]:
    """The recipe's data files the plans' data steps read, from ``data_mirror`` or their URLs,
    sha256-checked against the recipe's digest where it has one (else the digest recorded): the
    files, and where each came from."""
    files: list[BundleFile] = []
    origins: dict[str, str] = {}
    by_name = {d.name: d for d in recipe.data}
    for step in _steps(plans, Plan.downloads):
        for spec in step.params.files:
            d = by_name[spec.name]
            rel = f"{DATA}/{d.mirror_name}"
            if any(f.path == rel for f in files):
                continue
            local = (data_mirror / d.mirror_name) if data_mirror else None
            origin, digest = fetch_data_file(d.name, d.url, d.sha256, root / rel, local)
            files.append(BundleFile(path=rel, sha256=digest, size=(root / rel).stat().st_size,
                                    kind="data", name=d.name))
            origins[d.mirror_name] = origin
            say(f"data {d.name}: {d.mirror_name} from {origin}, sha256 "
                + ("as the recipe says" if d.sha256 else f"{digest[:16]}... recorded (the recipe has none)"))
    return files, origins


def _pack_prebuilt(plans: list[Plan], root: Path, build_cache: Path | None, say: Progress) -> list[BundleFile]:
    """What the controller's build cache already holds for the plans' cached builds (same cache
    key): an Apex build's extension wheel, a build step's archive of its in-tree outputs. The
    node installs or restores them instead of building."""
    files: list[BundleFile] = []
    for step in _steps(plans, Plan.cached_builds):
        key = step.params.cache_key
        cached = cached_artifacts(build_cache / key) if build_cache else []
        if not cached:
            say(f"{key}: not in the build cache; the node builds it")
            continue
        dest = root / PREBUILT / key / cached[0].name
        if dest.exists():
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cached[0], dest)
        files.append(BundleFile(path=f"{PREBUILT}/{key}/{cached[0].name}", sha256=sha256_file(dest),
                                size=dest.stat().st_size, kind="prebuilt", name=key))
        what = "archive of build outputs" if cached[0].name == TREE_ARCHIVE else "wheel"
        say(f"{key}: prebuilt {what} {cached[0].name} from the build cache")
    return files


def _pack_image(image, image_tar: Path, root: Path, say: Progress) -> tuple[BundleFile, CarriedImage]:
    """The base image as its engine saved it (``--image-tar``; ``image``: ``carried_image``'s):
    the node loads it instead of pulling."""
    name, saved = image
    rel = f"{IMAGES}/{_image_file(name)}"
    (root / rel).parent.mkdir(parents=True)
    try:  # a hard link where the folders share a file system: the archive is often GBs
        os.link(image_tar, root / rel)
    except OSError:
        shutil.copyfile(image_tar, root / rel)
    packed = BundleFile(path=rel, sha256=sha256_file(root / rel), size=(root / rel).stat().st_size,
                        kind="image", name=name)
    say(f"image {name} (ID {saved.id[:12]}): from {image_tar}, loaded on the node instead of pulled")
    return packed, CarriedImage(name=name, path=rel, id=saved.id)


def _pack_inputs(root: Path, recipe_file: Path, target_file: Path | None, lock_text: str,
                 plans: list[Plan]) -> list[BundleFile]:
    """What the bundle was made from and what runs it: the lock, the recipe, the target, the
    plan (every node's, named by host, where there are several), the playbooks."""
    (root / "lock.lock").write_text(lock_text)
    shutil.copyfile(recipe_file, root / "recipe.yaml")
    metas = [("lock.lock", "lock"), ("recipe.yaml", "recipe"), ("plan.json", "plan")]
    if target_file is not None:
        shutil.copyfile(target_file, root / "target.yaml")
        metas.append(("target.yaml", "target"))
    (root / "plan.json").write_text(plans[0].to_json())
    if len(plans) > 1:  # every node's plan, named by host (plan.json is the first's)
        (root / "plans").mkdir()
        for i, one in enumerate(plans):
            name = f"plans/{i:02d}-{''.join(c if c.isalnum() or c in '.-_' else '_' for c in one.host)}.json"
            (root / name).write_text(one.to_json())
            metas.append((name, "plan"))
    shutil.copytree(PLAYBOOKS, root / "playbooks", symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    metas += [(f"playbooks/{p}", "playbook") for p in tree_files(root / "playbooks")]
    files = []
    for rel, kind in metas:
        f = root / rel
        files.append(BundleFile(path=rel, sha256=sha256_file(f), size=f.stat().st_size, kind=kind))
    return files


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
    try:
        with open(part, "wb") as raw:
            stream = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=6) if compress else raw
            with tarfile.open(fileobj=stream, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for rel in names:
                    f = root / rel
                    with open(f, "rb") as fh:
                        tar.addfile(_tarinfo(rel, f.stat().st_size), fh)
            if compress:
                stream.close()
    except BaseException:  # a full disk, an interrupt: no half-written bundle is left beside the name
        part.unlink(missing_ok=True)
        raise
    part.replace(out)


def manifest_summary(manifest: Manifest) -> dict:
    """Counts and sizes per kind, for the command's output."""
    out: dict[str, dict] = {}
    for f in manifest.files:
        row = out.setdefault(f.kind, {"files": 0, "bytes": 0})
        row["files"] += 1
        row["bytes"] += f.size
    return json.loads(json.dumps(out))

