"""``envbuild provision --bundle FILE``: the hooks provision calls, in this order.

1. ``prepare(opts)``, before any node is contacted: open and verify the whole bundle
   (``envbuild.bundle.unpack``); the recipe and the lock come from the bundle, never from an
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

from pathlib import Path

from envbuild.bundle.unpack import Opened, open_bundle
from envbuild.errors import InputError

_OPENED: dict[tuple[str, int, int], Opened] = {}


def opened(path: str) -> Opened:
    """The verified bundle at ``path`` (verified once per process and file state)."""
    st = Path(path).stat() if Path(path).is_file() else None
    key = (str(Path(path).resolve()), st.st_size if st else -1, st.st_mtime_ns if st else -1)
    if key not in _OPENED:
        _OPENED[key] = open_bundle(path)
    return _OPENED[key]


def prepare(opts) -> Opened | None:
    """Verify the bundle and point ``opts`` at its recipe and lock (see the module docstring)."""
    if not getattr(opts, "bundle", None):
        return None
    for flag, value in (("--git-mirror", opts.git_mirror), ("--wheelhouse", opts.wheelhouse), ("--lock", opts.lock)):
        if value:
            raise InputError(f"--bundle and {flag} given", hint=f"the bundle carries what {flag} would give; drop {flag}")
    b = opened(opts.bundle)
    m = b.manifest
    if opts.recipe:
        from envbuild.recipes import load_recipe

        if load_recipe(opts.recipe).name != m.recipe:
            raise InputError(f"the bundle is for recipe {m.recipe}, not {opts.recipe}",
                             hint="leave the recipe out: it comes from the bundle")
    from envbuild.targets import load_target

    if load_target(opts.target).name != m.target:
        raise InputError(f"the bundle was made for target {m.target}, not {opts.target}",
                         hint=f"provision with --target {m.target}, or make a bundle for {opts.target}")
    opts.recipe, opts.lock, opts.locked = str(b.recipe_file), str(b.lock_file), True
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
        rd.update_run(bundle={**b.summary(), "prebuilt_seeded": seeded})
