"""The bundle flow: one tar file with everything a recipe's lock names, for nodes with no
network (``envbuild.bundle.pack``), its provenance signed beside it with a key
(``envbuild.flows.signing``).

``bundle(BundleRequest(...), progress=...) -> BundleOutcome``. The recipe and target are
loaded, the given folders checked, the lock found (CheckFailed without one: a bundle packs what
a lock names), each node planned (from ``facts_file``, else the target's facts), the key checked
before anything is packed, then the bundle written. Its statement names the bundle by sha256 and
the recipe, target and lock files it was made from, by sha256, and every pinned commit. An
unsigned bundle written over a signed one removes the old envelope, and says so to ``progress``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from envbuild.bundle.pack import Packed
from envbuild.flows.signing import Stamp, beside, sign_provenance, signer


@dataclass(frozen=True)
class BundleRequest:
    """What ``envbuild bundle`` was asked: the recipe (None: the embedded reference) and target
    (names or YAML paths), the nodes' ``facts_file``, the ``lock_file``, the folders files come
    from (``wheelhouse``, ``git_mirror``, ``data_mirror``), the environment's ``prefix``, the
    bundle to write (``output``), ``sign_key`` with ``valid_days``, the base image's
    ``image_tar``, ``offline`` (refuse when the node would still need the network) and
    ``smoke`` (False: the nodes planned without the benchmark, as ``provision --no-smoke``: a
    node with too few GPUs for it is planned; a provision of it with the benchmark is refused
    by its own preflight, and the benchmark's step adds nothing a bundle packs)."""

    recipe: str | None
    target: str
    output: Path
    facts_file: str | None = None
    lock_file: str | None = None
    wheelhouse: str | None = None
    git_mirror: str | None = None
    data_mirror: str | None = None
    prefix: str | None = None
    sign_key: Path | None = None
    valid_days: float | None = None
    image_tar: Path | None = None
    offline: bool = False
    smoke: bool = True


@dataclass(frozen=True)
class BundleOutcome:
    """The bundle written (``packed``: its file, sha256, size and manifest), what it was made
    for, its envelope (``provenance``, with a key) and the stale one removed."""

    packed: Packed
    recipe: str
    target: str
    nodes: list[str]
    kinds: dict
    provenance: Path | None = None
    removed: Path | None = None

    def to_dict(self) -> dict:
        m = self.packed.manifest
        out = {"bundle": str(self.packed.path), "sha256": self.packed.sha256, "bytes": self.packed.size,
               "recipe": self.recipe, "target": self.target, "kinds": self.kinds, "nodes": self.nodes,
               "omitted": [o.model_dump() for o in m.omitted],
               "images": [i.model_dump() for i in m.images], "offline": m.is_offline,
               "needs_network": [n.model_dump() for n in m.needs_network], "origins": self.packed.origins}
        if self.provenance:
            out["provenance"] = str(self.provenance)
        if self.removed:
            out["removed"] = [str(self.removed)]
        return out


def bundle(request: BundleRequest, progress: Callable[[str], None] | None = None) -> BundleOutcome:
    """Plan, pack and sign (or clear) the bundle's provenance (see the module docstring)."""
    from envbuild import rundir
    from envbuild.bundle.pack import make_bundle, manifest_summary, node_plans
    from envbuild.catalog import resolve as resolve_file
    from envbuild.errors import CheckFailed, InputError
    from envbuild.inputs import find_lock, lock_source, node_facts, recipe_and_target
    from envbuild.recipes import DATA as RECIPES
    from envbuild.targets import DATA as TARGETS

    say = progress or (lambda _m: None)
    rec, tgt = recipe_and_target(request.recipe, request.target)
    for name, value in (("--wheelhouse", request.wheelhouse), ("--git-mirror", request.git_mirror),
                        ("--data-mirror", request.data_mirror)):
        if value and not Path(value).is_dir():
            raise InputError(f"{name} {value}: no such folder", hint=f"pass an existing folder to {name}")
    lock = find_lock(rec, tgt, request.lock_file)
    lock_path = lock_source(rec, tgt, request.lock_file)
    if lock is None:
        raise CheckFailed(f"no lockfile at {lock_path}: a bundle packs what a lock names",
                          hint=f"lock first: envbuild lock {rec.name} --target {tgt.name}")
    plans = node_plans(rec, tgt, node_facts(tgt, request.facts_file), lock, request.prefix,
                       smoke=request.smoke)
    recipe_file = resolve_file(request.recipe or rec.name, RECIPES, "recipe")
    target_file = resolve_file(request.target, TARGETS, "target")
    sig = signer(request.sign_key, request.valid_days)  # an unusable key is refused before anything is packed
    packed = make_bundle(rec, recipe_file, target_file, lock, lock_path.read_text(), plans, request.output,
                         arch=tgt.platform.arch,
                         wheelhouse=Path(request.wheelhouse) if request.wheelhouse else None,
                         git_mirror=Path(request.git_mirror) if request.git_mirror else None,
                         data_mirror=Path(request.data_mirror) if request.data_mirror else None,
                         build_cache=rundir.envbuild_home() / "cache" / "wheels", progress=say,
                         image_tar=request.image_tar, offline=request.offline)
    files = {"recipe": recipe_file, "lock": lock_path, "target": target_file}
    signed = sign_provenance(beside(packed.path), sig,
                             lambda stamp: _statement(packed, rec.name, tgt.name, files, stamp))
    if signed.removed:
        say(f"  removed {signed.removed}: the provenance of the bundle this one replaced")
    return BundleOutcome(packed, rec.name, tgt.name, [p.host for p in plans], manifest_summary(packed.manifest),
                         signed.provenance, signed.removed)


def _statement(packed: Packed, recipe: str, target: str, files: dict[str, Path], stamp: Stamp) -> dict:
    """The bundle's in-toto statement: the bundle by sha256, made from ``files`` (recipe, lock,
    target: ``KIND:NAME`` -> sha256) and the pinned commits (``envbuild.bundle.provenance``)."""
    from envbuild.bundle.provenance import statement
    from envbuild.fsio import sha256_file

    inputs = {f"{kind}:{f.name}": sha256_file(f) for kind, f in files.items()}
    return statement(packed.path.name, packed.sha256, recipe=recipe, target=target,
                     lock_digest=packed.manifest.lock_digest, inputs=inputs,
                     git=[(g.url, g.sha) for g in packed.manifest.git], **stamp.fields())
