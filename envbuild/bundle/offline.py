"""``envbuild provision --bundle FILE``: the hooks provision calls, in this order.

1. ``prepare(opts)``, before any node is contacted: open and verify the whole bundle
   (``envbuild.bundle.unpack``; ``--bundle-sha256`` pins the file before a byte is unpacked);
   its lock must be the lock envbuild holds for its recipe and target, unless the user pinned
   the file with ``--bundle-sha256`` (``trusted_lock``); a signed provenance
   (``--trusted-key``) pins the file too, but never switches that comparison off, and a
   bundle older than the newest one accepted here for its recipe and target is refused
   (``envbuild.bundle.rollback``), as is one whose statement names another recipe, target or
   lock; the recipe and the lock come from the bundle, never from an index or a mirror
   (``--recipe``/``--target``, when given, must name what it was made for).
2. ``plan_bundle(opts)``: the plan's ``bundle`` step (``PlanOptions.bundle``): pip installs
   ``--no-index`` from the node's copy of the wheels, git clones the node's copy of the
   pinned commits.
3. ``check_plan(opts, plan)``: CheckFailed (exit 1) when a node's plan needs something the
   bundle lacks, before anything is installed.
4. ``record(opts, rd, cache_dir)``: run.json's ``bundle`` (offline, the bundle's digest) and
   prebuilt extension wheels into the controller's build cache.
"""

from __future__ import annotations

import json
from pathlib import Path

from envbuild.bundle.manifest import MANIFEST
from envbuild.bundle.unpack import Opened, open_bundle
from envbuild.errors import CheckFailed, InputError
from envbuild.fsio import write_tar
from envbuild.lock.location import locate_lock
from envbuild.lock.serialize import lock_digest, parse_lock
from envbuild.record import RunWriter
from envbuild.targets import load_target

LOCK_MEMBER = "lock.lock"  # where a bundle carries its lock (Opened.lock_file)
_OPENED: dict[tuple[str, int, int], Opened] = {}


def opened(path: str, expect_sha256: str | None = None) -> Opened:
    """The verified bundle at ``path`` (verified once per process and file state)."""
    st = Path(path).stat() if Path(path).is_file() else None
    key = (str(Path(path).resolve()), st.st_size if st else -1, st.st_mtime_ns if st else -1)
    if key not in _OPENED:
        _OPENED[key] = open_bundle(path, expect_sha256=expect_sha256)
    return _OPENED[key]


def trusted_lock(b: Opened, pinned: bool) -> None:
    """The bundle's lock must be the lock envbuild holds for its recipe and target (the user's
    lockdir, else the shipped one), byte for byte by its digest; a bundle made from a lock of
    the user's own is accepted only when the user pinned the bundle file (``--bundle-sha256``,
    or a signed provenance). A re-packed bundle (a wheel replaced, lock and manifest re-hashed)
    fails here: its lock is not the one envbuild holds. CheckFailed, exit 1."""
    _held_lock(b.file, b.lock_file.read_text(), b.manifest.recipe, b.manifest.target, pinned)


def trusted_lock_unopened(file: Path) -> None:
    """``trusted_lock`` before a byte of the bundle is unpacked: its lock and manifest read from
    the tar into memory (a re-packed bundle never reaches the disk)."""
    from envbuild.bundle.unpack import peek

    got = peek(file, (MANIFEST, LOCK_MEMBER))
    if MANIFEST not in got or LOCK_MEMBER not in got:
        return  # not a bundle envbuild made: open_bundle says what is wrong with it
    try:
        manifest = json.loads(got[MANIFEST])
        recipe, target = str(manifest["recipe"]), str(manifest["target"])
    except (ValueError, KeyError, TypeError):
        return
    _held_lock(file, got[LOCK_MEMBER].decode("utf-8", errors="replace"), recipe, target, pinned=False)


def _held_lock(file: Path, lock_text: str, recipe: str, target: str, pinned: bool) -> None:
    theirs = lock_digest(parse_lock(lock_text, f"{file.name}:{LOCK_MEMBER}"))
    try:  # by name: the user's lockdir (a recipe of one's own locked there), else the shipped locks
        held = locate_lock(recipe, target)
    except InputError:
        held = None
    ours = lock_digest(parse_lock(held.read_text(), held)) if held is not None and held.is_file() else None
    if theirs == ours or pinned:
        return
    where = (f"the lock envbuild holds for {recipe} on {target} ({held}, lock digest "
             f"{ours[:12]})" if ours else f"no lock envbuild holds ({recipe} on {target} "
             "has none in the lockdir or the shipped locks)")
    raise CheckFailed(f"the bundle {file.name} carries lock digest {theirs[:12]}, not {where}: its wheels and "
                      "commits are not the ones envbuild pinned",
                      hint="make the bundle again with `envbuild bundle`; if you made it from a lock of your own, "
                           "pin the file you made by the sha256 `envbuild bundle` printed when it wrote it: "
                           "--bundle-sha256 HEX (never the digest of a file you did not make)")


def prepare(opts) -> Opened | None:
    """Verify the bundle and point ``opts`` at its recipe and lock (see the module docstring)."""
    if not getattr(opts, "bundle", None):
        return None
    for flag, value in (("--git-mirror", opts.git_mirror), ("--wheelhouse", opts.wheelhouse), ("--lock", opts.lock)):
        if value:
            raise InputError(f"--bundle and {flag} given", hint=f"the bundle carries what {flag} would give; drop {flag}")
    from envbuild.bundle import rollback

    pin = getattr(opts, "bundle_sha256", None)  # the user's own pin: a bundle made from their own lock
    said = None
    if getattr(opts, "trusted_keys", ()):  # the signed provenance pins the file before it is unpacked
        from envbuild.bundle import provenance

        bundle = Path(opts.bundle)
        envelope = Path(opts.provenance) if getattr(opts, "provenance", None) else provenance.envelope_path(bundle)
        stmt = provenance.verify(bundle, envelope, [Path(k) for k in opts.trusted_keys])
        signed = stmt["subject"][0]["digest"]["sha256"]
        if pin and pin.strip().lower() != signed:
            raise CheckFailed(f"--bundle-sha256 {pin} is not the signed statement's {signed}",
                              hint="drop one of them; nothing was unpacked")
        said = rollback.check(stmt)  # not older than the newest accepted here, before a byte is unpacked
    if not pin:  # a signature never switches off the comparison with the lock envbuild holds
        trusted_lock_unopened(Path(opts.bundle))
    b = opened(opts.bundle, pin or (said and said["sha256"]))
    trusted_lock(b, pinned=bool(pin))
    m = b.manifest
    if said is not None:
        held = lock_digest(parse_lock(b.lock_file.read_text(), b.lock_file))
        bound = {"recipe": m.recipe, "target": m.target, "lock_digest": held}
        if any(said[k] != v for k, v in bound.items()) or m.lock_digest != held:
            differ = ", ".join(k for k, v in bound.items() if said[k] != v) or "lock digest"
            raise CheckFailed(f"the bundle {b.file.name}: its signed statement's {differ} differ from what the bundle "
                              "carries", hint="the statement and the bundle were not made together; nothing was "
                                              "installed")
    if opts.recipe:
        from envbuild.recipes import load_recipe

        if load_recipe(opts.recipe).name != m.recipe:
            raise InputError(f"the bundle is for recipe {m.recipe}, not {opts.recipe}",
                             hint="leave the recipe out: it comes from the bundle")

    if load_target(opts.target).name != m.target:
        raise InputError(f"the bundle was made for target {m.target}, not {opts.target}",
                         hint=f"provision with --target {m.target}, or make a bundle for {opts.target}")
    opts.recipe, opts.lock, opts.locked = str(b.recipe_file), str(b.lock_file), True
    if said is not None:
        rollback.remember(said)  # the newest accepted for its recipe and target: older ones are refused
    staged = b.stage_params()
    write_tar(staged.src, [f.name for f in staged.files], staged.archive)  # what each node receives
    return b


def plan_bundle(opts):
    """``PlanOptions.bundle`` for a provision (None without ``--bundle``)."""
    return opened(opts.bundle).stage_params() if getattr(opts, "bundle", None) else None


def check_plan(opts, plan) -> None:
    if getattr(opts, "bundle", None):
        opened(opts.bundle).check_plan(plan)


def record(opts, rd, cache_dir: str) -> None:
    if getattr(opts, "bundle", None):
        b = opened(opts.bundle)
        seeded = b.seed_build_cache(Path(cache_dir))
        RunWriter(rd).update(bundle={**b.summary(), "prebuilt_seeded": seeded,
                                     "prebuilt_not_used": b.prebuilt_not_used(Path(cache_dir))})
