"""``envbuild provision --bundle FILE``: the hooks provision calls, in this order.

1. ``prepare(opts)``, before any node is contacted: open and verify the whole bundle
   (``envbuild.bundle.unpack``; ``--bundle-sha256`` pins the file before a byte is unpacked);
   its lock must be the lock envbuild holds for its recipe and target, unless the file is
   pinned (``trusted_lock``); the recipe and the lock come from the bundle, never from an
   index or a mirror (``--recipe``/``--target``, when given, must name what it was made for).
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
from envbuild.inputs import lock_source
from envbuild.lock.serialize import lock_digest, parse_lock
from envbuild.recipes import load_recipe
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
    try:
        held = lock_source(load_recipe(recipe), load_target(target), None)
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
    pin = getattr(opts, "bundle_sha256", None)
    if getattr(opts, "trusted_keys", ()):  # the signed provenance pins the file before it is unpacked
        from envbuild.bundle import provenance

        bundle = Path(opts.bundle)
        envelope = Path(opts.provenance) if getattr(opts, "provenance", None) else provenance.envelope_path(bundle)
        stmt = provenance.verify(bundle, envelope, [Path(k) for k in opts.trusted_keys])
        signed = stmt["subject"][0]["digest"]["sha256"]
        if pin and pin.strip().lower() != signed:
            raise CheckFailed(f"--bundle-sha256 {pin} is not the signed statement's {signed}",
                              hint="drop one of them; nothing was unpacked")
        pin = signed
    if not pin:
        trusted_lock_unopened(Path(opts.bundle))
    b = opened(opts.bundle, pin)
    trusted_lock(b, pinned=bool(pin))
    m = b.manifest
    if opts.recipe:
        from envbuild.recipes import load_recipe

        if load_recipe(opts.recipe).name != m.recipe:
            raise InputError(f"the bundle is for recipe {m.recipe}, not {opts.recipe}",
                             hint="leave the recipe out: it comes from the bundle")

    if load_target(opts.target).name != m.target:
        raise InputError(f"the bundle was made for target {m.target}, not {opts.target}",
                         hint=f"provision with --target {m.target}, or make a bundle for {opts.target}")
    opts.recipe, opts.lock, opts.locked = str(b.recipe_file), str(b.lock_file), True
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
        RunWriter(rd).update(bundle={**b.summary(), "prebuilt_seeded": seeded})
