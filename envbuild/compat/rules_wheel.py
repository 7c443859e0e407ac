"""Rows about the torch wheel itself: published variants, Python tags, GPU archs, driver."""

from __future__ import annotations

from envbuild import cuda_arch as ca
from envbuild.compat.context import Context
from envbuild.compat.rule import Rule
from envbuild.compat.torch_wheels import ISSUE_75992, LTS_INDEX, WHEELS, variants
from envbuild.versions import vtuple


def _installs_torch(ctx: Context) -> bool:
    return bool(ctx.torch) and not ctx.torch.package.preinstalled and not ctx.container


def _python_no_wheel(ctx: Context) -> str | None:
    t = ctx.torch
    if not _installs_torch(ctx) or t.row is None or ctx.recipe.python in t.row.pythons:
        return None
    have = ", ".join("cp" + p.replace(".", "") for p in t.row.pythons)
    return f"torch {t.label} has no wheel for Python {ctx.recipe.python} (published: {have})"


def _unpublished(ctx: Context) -> str | None:
    t = ctx.torch
    if not t or not t.known_version or t.row is not None or t.tag == "pypi":
        return None
    tags = ", ".join(sorted({w.tag for w in variants(t.version)}))
    return f"torch {t.version}+{t.tag} was never published (variants of {t.version}: {tags})"


def _not_on_pypi(ctx: Context) -> str | None:
    t = ctx.torch
    if not _installs_torch(ctx) or t.package.index or not t.known_version:
        return None
    rows = variants(t.version)
    default = next((w for w in rows if w.pypi), None)
    if default is None:
        return f"torch {t.version} is not on PyPI (it is on {rows[0].index}); the recipe gives no index"
    if t.row is not None and not t.row.pypi:
        return (f"torch {t.label} is not on PyPI (PyPI's torch {t.version} is the {default.tag} build); "
                f"the recipe gives no index (it is on {t.row.index})")
    return None


def _unknown_version(ctx: Context) -> str | None:
    t = ctx.torch
    if not t or t.known_version:
        return None
    return f"torch {t.version} ({t.tag}) is not in the wheel table; Python/arch/driver checks skipped"


def _suggest_for(cc: str) -> str:
    fits = [w for w in WHEELS if w.cuda and ca.binary_runs(list(w.archs), list(w.ptx), cc)
            and w.index and "a0+" not in w.versions[0]]
    if not fits:
        return "a torch build compiled for this GPU"
    w = min(fits, key=lambda w: vtuple(w.versions[0]))
    return f"torch {w.versions[-1]}+{w.tag} or newer"


def _lacks_arch(ctx: Context) -> str | None:
    t = ctx.torch
    if not t or t.row is None or not t.row.cuda or not ctx.facts.gpus:
        return None
    bad = []
    for cc in ctx.facts.archs:
        if ca.binary_runs(list(t.row.archs), list(t.row.ptx), cc):
            continue
        built = ", ".join(ca.sm(a) for a in t.row.archs)
        ptx = ("PTX for " + ", ".join(ca.sm(p) for p in t.row.ptx)) if t.row.ptx else "no PTX"
        msg = (f"torch {t.label} (CUDA {t.row.cuda}) has kernels for {built} and {ptx}; "
               f"{ctx.gpu_names[cc]} is {ca.sm(cc)}")
        need = ca.min_cuda_for_arch(cc)
        if need and not ca.cuda_supports_arch(t.row.cuda, cc):
            msg += f" (CUDA {t.row.cuda} cannot target {ca.sm(cc)}; that needs CUDA >= {need})"
        bad.append(msg + f"; use {_suggest_for(cc)}")
    return "; ".join(bad) or None


def _driver_too_old(ctx: Context) -> str | None:
    t = ctx.torch
    have = ctx.node_driver_cuda
    if not t or not t.cuda or not ctx.facts.gpus or not have:
        return None
    need = t.cuda
    if vtuple(have) >= vtuple(need):
        return None
    driver, what = ctx.node_driver
    if vtuple(have)[0] == vtuple(need)[0] and ca.minor_compat(driver, need):
        return None
    row = next((r for r in ca.DRIVER_MIN if r.cuda == need), None)
    want = f"driver >= {row.min_driver}" if row else f"a driver for CUDA {need}"
    return (f"torch {t.label} needs CUDA {need}; {what} supports up to CUDA {have} "
            f"(install {want} or pick a CUDA {have.split('.')[0]}.x build)")


def _driver_minor(ctx: Context) -> str | None:
    t = ctx.torch
    have = ctx.node_driver_cuda
    if not t or not t.cuda or not ctx.facts.gpus or not have or vtuple(have) >= vtuple(t.cuda):
        return None
    driver, what = ctx.node_driver
    if vtuple(have)[0] == vtuple(t.cuda)[0] and ca.minor_compat(driver, t.cuda):
        return (f"torch {t.label} (CUDA {t.cuda}) on {what} (CUDA {have}) "
                f"runs through minor-version compatibility only; PTX JIT of newer PTX is unavailable")
    return None


RULES: list[Rule] = [
    Rule("torch-python-no-wheel", "error", "the torch variant has no wheel for the recipe's Python",
         "torch wheels are built per CPython minor (cp3X tag); pip finds no candidate",
         "https://anaconda.org/pytorch-lts/pytorch/files", "change python: to a listed version, or the torch pin",
         _python_no_wheel),
    Rule("torch-variant-unpublished", "error", "torch version/CUDA tag never published",
         "each torch release is built for a fixed set of CUDA versions (pytorch/builder manywheel); "
         "e.g. release/1.10 knows CUDA <= 11.3, so 1.10.0+cu116 does not exist",
         "https://github.com/pytorch/builder/blob/release/1.10/manywheel/build.sh",
         "use a published tag (cuda: auto picks the best one for the node)", _unpublished),
    Rule("torch-not-on-pypi", "error", "the torch pin is not on PyPI and no index is given",
         "PyPI carries one CUDA variant per release; 1.8.2 LTS and +cuXXX local versions live on "
         "download.pytorch.org find-links pages", LTS_INDEX,
         "set the package's index to the find-links page (index_kind: find-links)", _not_on_pypi),
    Rule("torch-version-unknown", "warning", "torch version not in the compatibility table",
         "without a row, Python tags, arch lists and CUDA variants cannot be checked",
         "envbuild/compat/torch_wheels.py", "add a row with its source to envbuild/compat/torch_wheels.py",
         _unknown_version),
    Rule("wheel-lacks-gpu-arch", "error", "the torch wheel has no kernels for the node's GPU arch",
         "a cubin runs only on the same major arch with >= minor; without PTX there is no JIT "
         "fallback, so every CUDA kernel fails with 'no kernel image is available'",
         ca.CUBIN_RULE + " ; https://github.com/pytorch/builder/blob/lts/release/1.8/manywheel/build.sh",
         "use a torch build whose arch list covers the GPU (sm_90 needs a cu118+ torch >= 2.0 or an "
         "NGC image with CUDA >= 11.8), or run on a GPU the wheel covers", _lacks_arch),
    Rule("driver-too-old", "error", "the driver is too old for the wheel's CUDA",
         "the CUDA runtime in the wheel needs a driver at least as new as its CUDA (or, same major, "
         "the minor-version-compatibility minimum)", ca.NVIDIA_RELEASE_NOTES,
         "upgrade the driver or pin an older CUDA tag (cuda: auto)", _driver_too_old),
    Rule("driver-minor-compat", "warning", "wheel CUDA minor newer than the driver's",
         "CUDA minor-version compatibility lets an 11.x (12.x) runtime run on any 11.x (12.x) driver "
         f"except PTX JIT; a cu113 wheel on an 11.4 node is the converse, fine case ({ISSUE_75992})",
         ca.NVIDIA_RELEASE_NOTES, "prefer a tag <= the driver's CUDA (cuda: auto)", _driver_minor),
]
