"""Rows about the other source trees and pins: Megatron b31e129, metaseq, PyPI names, setuptools, NumPy."""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from envbuild.compat import commits as cm
from envbuild.compat import fairscale_facts
from envbuild import cuda_arch as ca
from envbuild.compat.context import Context
from envbuild.compat.rule import Rule
from envbuild.versions import admits, version_lt, vtuple


def _fused_disabled(ctx: Context, src) -> bool:
    cmd = ctx.recipe.benchmark.command if ctx.recipe.benchmark else ""
    patched = any(p.component == src.name and "fused_kernels" in p.file for p in ctx.recipe.patches)
    return patched or "--no-masked-softmax-fusion" in cmd


def _megatron_gencode(ctx: Context) -> str | None:
    for src in ctx.sources_where(cm.is_b31e129_megatron):
        if _fused_disabled(ctx, src):
            continue
        built = ["7.0"] + (["8.0"] if vtuple(ctx.facts.nvcc or "11")[0] >= 11 else [])
        bad = [cc for cc in ctx.facts.archs if not ca.binary_runs(built, [], cc)]
        if bad:
            return (f"{src.name} (Megatron b31e129) JIT-builds its fused kernels for "
                    f"{'/'.join(ca.sm(b) for b in built)} only, no PTX; node GPU "
                    f"{', '.join(ca.sm(c) + ' (' + ctx.gpu_names[c] + ')' for c in bad)} cannot run them")
    return None


def _megatron_no_setup(ctx: Context) -> str | None:
    for src in ctx.sources_where(cm.is_b31e129_megatron):
        if src.install in ("editable", "wheel"):
            return (f"{src.name} is installed '{src.install}', but b31e129 has no setup.py or "
                    f"requirements.txt (deleted in 6c00f448)")
    return None


def _metaseq_megatron(ctx: Context) -> str | None:
    """Decided by the metaseq commit's history, not by a list of SHAs: metaseq needs Megatron
    fairseq_v3 from 5ca60055 (the switch) on. A recipe shows its metaseq commit contains the
    switch by listing it in the source's ``requires_ancestors``, which ``envbuild lock`` checks
    against the git mirror (``git merge-base --is-ancestor``) and records."""
    megatron = [s for s in ctx.recipe.sources if cm.is_fairseq_v2(s) or cm.is_fairseq_v3(s)]
    for ms in ctx.sources_where(cm.is_metaseq):
        sha = (ms.sha or ms.ref or "")[:8]
        switched = cm.METASEQ_V3_SWITCH in ms.requires_ancestors
        for mg in megatron:
            if cm.is_fairseq_v3(mg) and not switched:
                return (f"{mg.name} is Megatron fairseq_v3, which metaseq needs only from 5ca60055 (the switch) "
                        f"on; {ms.name} {sha} is not shown to contain 5ca60055 (its requires_ancestors)")
            if cm.is_fairseq_v2(mg) and switched:
                return (f"{ms.name} {sha} contains 5ca60055 (requires_ancestors), after which metaseq needs "
                        f"Megatron fairseq_v3 (#460, #523); {mg.name} is fairseq_v2")
    return None


SKLEARN_ENV = "SKLEARN_ALLOW_DEPRECATED_SKLEARN_PACKAGE_INSTALL"


def _sklearn(ctx: Context) -> str | None:
    for ms in ctx.sources_where(cm.is_metaseq):
        # a tree installed without its dependencies (pip --no-deps) never resolves 'sklearn'
        if ms.install == "none" or ms.dependencies == "none" or (ms.sha != cm.METASEQ_A1A4E733
                                    and cm.METASEQ_A1A4E733 not in ms.requires_ancestors):
            continue
        envs = [ctx.all_env()] + [p.env for p in ctx.recipe.packages]
        if not any(e.get(SKLEARN_ENV, "").lower() == "true" for e in envs):
            return f"{ms.name} (a1a4e733 or later) install_requires 'sklearn', which refuses to install unless {SKLEARN_ENV}=True"
    return None


COLLIDING = {"apex": "a Pyramid toolkit", "metaseq": "a 2015 sequencing package",
             "ezpz": "a 2016 image-cropping package"}


def _pypi_collision(ctx: Context) -> str | None:
    bad = [p.name for p in ctx.recipe.packages
           if p.name.lower() in COLLIDING and not p.index and not p.preinstalled]
    if not bad:
        return None
    return "; ".join(f"PyPI '{n}' is {COLLIDING[n.lower()]}, not the project the recipe means" for n in bad)


def _jit_arch_list(ctx: Context) -> str | None:
    t = ctx.torch
    if not t or not ctx.builds_cuda or not version_lt(t.version, "2.0"):
        return None
    if "TORCH_CUDA_ARCH_LIST" in ctx.all_env():
        return None
    bad = [cc for cc in ctx.facts.archs if vtuple(cc) > (8, 6)]
    if not bad:
        return None
    return (f"torch {t.version}'s cpp_extension knows archs up to 8.6; auto-detected "
            f"{', '.join(ca.sm(c) for c in bad)} is rejected when extensions are built")


def _setuptools(ctx: Context) -> str | None:
    t = ctx.torch
    if not t or ctx.container or not version_lt(t.version, "1.11") or ctx.recipe.environment.setuptools:
        return None
    return (f"torch {t.version} with an unpinned setuptools: setuptools >= 59.6 breaks torch's use of "
            f"distutils.version (metaseq CI pins setuptools==59.5.0)")


def _numpy2(ctx: Context) -> str | None:
    t = ctx.torch
    if not t or ctx.container or not version_lt(t.version, "2.0") or vtuple(ctx.recipe.python) < (3, 9):
        return None
    np = ctx.recipe.package("numpy")
    spec = np.version if np else None
    if np and not admits(spec, "2.0.0"):
        return None
    return (f"torch {t.version} is built against NumPy 1.x, and numpy {spec or '(unpinned)'} on Python "
            f"{ctx.recipe.python} admits NumPy 2")


# fairscale commits -> the version fairscale declares there and the file it was read from
# (envbuild/compat/fairscale_versions.yaml, read from the tree at each commit in a git mirror)
FAIRSCALE_FACTS = fairscale_facts.load()
# metaseq/trainer.py (a1a4e733 and 5ca60055, under FSDP): the version checks, as strings
METASEQ_FAIRSCALE_CHECKS = (("<", "0.4.0", "--update-freq > 1 raises 'Please update to fairscale 0.4.0'"),
                            (">=", "0.3.9", "--use-sharded-state asserts 'requires newer fairscale'"))


def fairscale_version(ctx: Context) -> tuple[str | None, str]:
    """The fairscale version the recipe installs and where that is known from."""
    for src in ctx.recipe.sources:
        if cm.is_fairscale(src):
            row = FAIRSCALE_FACTS.get(src.sha or "")
            where = f"{src.name} @ {(src.sha or src.ref)[:8]}"
            return (row.version, f"{where} ({row.path})") if row else (None, where)
    pkg = ctx.recipe.package("fairscale")
    if pkg is not None:
        try:
            Version(pkg.version)
            return pkg.version, f"package fairscale=={pkg.version}"
        except InvalidVersion:
            return None, f"package fairscale {pkg.version}"
    return None, ""


def _fairscale_unknown(ctx: Context) -> str | None:
    """A pinned fairscale commit without a row: metaseq's comparisons cannot be judged."""
    if not ctx.sources_where(cm.is_metaseq):
        return None
    src = next(iter(ctx.sources_where(cm.is_fairscale)), None)  # the one fairscale_version reads
    if src is None or (src.sha or "") in FAIRSCALE_FACTS:
        return None
    pin = src.sha[:12] if src.sha else f"{src.ref} (no sha)"
    return (f"the version {src.name} declares at {pin} is unknown (no row in "
            f"envbuild/compat/{fairscale_facts.FACT_PATH.name}), so metaseq's text comparisons of "
            f"fairscale.__version__ are not judged; read it from a mirror: {fairscale_facts.READ_RECIPE}")


def _fairscale_string_version(ctx: Context) -> str | None:
    if not ctx.sources_where(cm.is_metaseq):
        return None
    version, where = fairscale_version(ctx)
    if version is None:
        return None
    wrong = []
    for op, ref, effect in METASEQ_FAIRSCALE_CHECKS:
        as_text = version < ref if op == "<" else version >= ref
        as_version = Version(version) < Version(ref) if op == "<" else Version(version) >= Version(ref)
        if as_text != as_version:
            wrong.append(f"fairscale.__version__ {op} {ref!r} is {as_text} as strings but {as_version} "
                         f"as versions ({effect})")
    if not wrong:
        return None
    return f"metaseq compares fairscale {version!r} ({where}) as text: " + "; ".join(wrong)


PINS = "shared/docs/PINS.md"

RULES: list[Rule] = [
    Rule("megatron-fused-kernels-arch", "error", "Megatron b31e129 fused kernels cannot run on the GPU",
         "megatron/fused_kernels/__init__.py forces TORCH_CUDA_ARCH_LIST='' and gencode sm_70 (+sm_80 "
         "for nvcc >= 11), no PTX; cubins do not cross majors (inference for sm_90)",
         "NVIDIA/Megatron-LM@b31e1296:megatron/fused_kernels/__init__.py",
         "patch the gencode list in megatron/fused_kernels/__init__.py, or disable fusions "
         "(--no-masked-softmax-fusion ...)", _megatron_gencode),
    Rule("megatron-no-setup-py", "error", "Megatron b31e129 cannot be pip-installed",
         "6c00f448 deleted setup.py/requirements.txt before b31e129", "NVIDIA/Megatron-LM@6c00f448",
         "install: pth (put the tree on sys.path)", _megatron_no_setup),
    Rule("metaseq-megatron-branch", "error", "metaseq commit and Megatron fairseq branch disagree",
         "metaseq switched to fairseq_v3 in 5ca60055 (#460); older metaseq calls fairseq_v2 APIs",
         "https://github.com/facebookresearch/metaseq/issues/523",
         f"metaseq containing {cm.METASEQ_V3_SWITCH[:8]} (list it in the metaseq source's requires_ancestors: "
         "the lock checks it) -> fairseq_v3 (fa6c0860); older metaseq (a1a4e733) -> fairseq_v2", _metaseq_megatron),
    Rule("metaseq-sklearn-brownout", "error", "metaseq's 'sklearn' requirement refuses to install",
         "the deprecated sklearn PyPI package raises on install since 2023-12-01",
         "https://pypi.org/project/sklearn/0.0.post7/", f"set {SKLEARN_ENV}=True in the metaseq source's env",
         _sklearn),
    Rule("pypi-name-collision", "error", "a package name on PyPI is someone else's project",
         "apex, metaseq and ezpz on PyPI are unrelated packages", PINS,
         "install it from its git source (sources:) instead", _pypi_collision),
    Rule("torch-jit-arch-list", "warning", "old torch rejects auto-detected archs above 8.6",
         "1.x cpp_extension supported_arches stop at 8.6 (inference from copies in the index)", PINS,
         "set TORCH_CUDA_ARCH_LIST (e.g. '8.0;8.6') in the recipe env", _jit_arch_list),
    Rule("setuptools-old-torch", "warning", "setuptools >= 59.6 breaks torch < 1.11",
         "torch used setuptools' distutils.version (pytorch PR 69904)",
         "https://github.com/pytorch/pytorch/pull/69904", "set environment.setuptools: '==59.5.0'",
         _setuptools),
    Rule("fairscale-version-string-compare", "error",
         "metaseq misjudges the fairscale version (compared as text)",
         "metaseq/trainer.py checks fairscale.__version__ < \"0.4.0\" and >= \"0.3.9\" as strings, so a "
         "version such as 0.10.0 or 0.3.10 orders wrongly: a new enough fairscale is refused",
         "facebookresearch/metaseq@5ca6005552b7a049f071754393d5b86185e0db6a:metaseq/trainer.py",
         "install a fairscale whose version string orders like its version (the 0.4.x line: 0.4.6 at "
         "19155319), or patch the comparison to packaging.version", _fairscale_string_version),
    Rule("fairscale-version-unknown", "warning", "the fairscale version at the pinned commit is unknown",
         "fairscale-version-string-compare judges the version fairscale declares at its commit "
         "(fairscale/version.py __version_tuple__, or __version__ in fairscale/__init__.py before it), read "
         "from the tree in a git mirror and committed; a commit without a row cannot be judged",
         "envbuild/compat/fairscale_versions.yaml",
         f"read it from a mirror: {fairscale_facts.READ_RECIPE} (it reads the fairscale pins of the shipped "
         "recipes and of each RECIPE named, and writes the file)", _fairscale_unknown),
    Rule("numpy2-torch1", "error", "NumPy 2 with a torch 1.x wheel",
         "torch 1.x wheels are compiled against the NumPy 1.x ABI ('A module that was compiled using "
         "NumPy 1.x cannot be run in NumPy 2.x')", "https://github.com/xai4space/meteors/issues/20",
         "pin numpy '<2'", _numpy2),
]
