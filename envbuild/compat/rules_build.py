"""Rows about what is compiled or installed from source: nvcc vs torch, Apex, Megatron, metaseq."""

from __future__ import annotations

from envbuild.compat import commits as cm
from envbuild.compat import cuda_arch as ca
from envbuild.compat.context import Context
from envbuild.compat.rule import Rule
from envbuild.compat.versions import admits, version_lt, vtuple

APEX_CHECK = "check_cuda_torch_binary_vs_bare_metal"


def _nvcc_missing(ctx: Context) -> str | None:
    if not ctx.builds_cuda or ctx.facts.nvcc:
        return None
    return f"no nvcc on {ctx.facts.host}, but " + "; ".join(ctx.cuda_ext_reasons)


def _cpu_torch(ctx: Context) -> str | None:
    if not ctx.builds_cuda or not ctx.torch or ctx.torch.tag != "cpu":
        return None
    why = "" if ctx.facts.gpus else f" (chosen because {ctx.facts.host} has no GPU)"
    return f"torch {ctx.torch.label} is a CPU build{why}, but " + "; ".join(ctx.cuda_ext_reasons)


def _nvcc_too_old(ctx: Context) -> str | None:
    nvcc = ctx.facts.nvcc
    if not ctx.builds_cuda or not nvcc:
        return None
    bad = [cc for cc in ctx.facts.archs if ca.cuda_supports_arch(nvcc, cc) is False]
    if not bad:
        return None
    return "; ".join(f"nvcc {nvcc} cannot compile for {ca.sm(cc)} ({ctx.gpu_names[cc]}); "
                     f"that needs CUDA >= {ca.min_cuda_for_arch(cc)}" for cc in bad)


def _split(ctx: Context) -> tuple[str, str] | None:
    """(nvcc, torch CUDA) when both are known and CUDA code is built."""
    if not ctx.builds_cuda or not ctx.facts.nvcc or not ctx.torch or not ctx.torch.cuda:
        return None
    return ctx.facts.nvcc, ctx.torch.cuda


def _major_mismatch(ctx: Context) -> str | None:
    pair = _split(ctx)
    if not pair or vtuple(pair[0])[0] == vtuple(pair[1])[0]:
        return None
    return (f"nvcc {pair[0]} vs torch {ctx.torch.label} (CUDA {pair[1]}): major versions differ, so "
            f"torch's BuildExtension and Apex's setup.py refuse to build")


def _relaxing_patch(ctx: Context) -> str | None:
    if not ctx.apex:
        return None
    for p in ctx.recipe.patches:
        if p.component == ctx.apex.name and (p.kind == "apex-cuda-check" or APEX_CHECK in (p.old or "")
                                             or "bare_metal" in (p.old or "")):
            return p.id
    return None


def _minor_differs(ctx: Context) -> tuple[str, str] | None:
    pair = _split(ctx)
    if not pair:
        return None
    n, t = vtuple(pair[0])[:2], vtuple(pair[1])[:2]
    return pair if n[0] == t[0] and n != t else None


def _minor_mismatch(ctx: Context) -> str | None:
    pair = _minor_differs(ctx)
    if not pair:
        return None
    patch = _relaxing_patch(ctx)
    if ctx.apex and ctx.apex.install == "apex" and patch is None:
        return None  # apex-check-unpatched reports it as an error
    tail = (f"Apex's exact-match check is relaxed by patch '{patch}'" if patch
            else "torch's BuildExtension only warns on a minor mismatch")
    return (f"nvcc {pair[0]} vs torch CUDA {pair[1]}: same major {vtuple(pair[0])[0]}, other minor; "
            f"feasible: {tail}")


def _apex_unpatched(ctx: Context) -> str | None:
    pair = _minor_differs(ctx)
    if not pair or not ctx.apex or _relaxing_patch(ctx):
        return None
    return (f"Apex's setup.py raises RuntimeError on nvcc {pair[0]} vs torch CUDA {pair[1]} (exact "
            f"match required) and the recipe has no patch relaxing {APEX_CHECK}")


def _apex_sed_noop(ctx: Context) -> str | None:
    if not ctx.apex:
        return None
    row, name = cm.apex_commit(ctx.apex)
    if row is None or row.date >= "2021-09-08":
        return None
    for p in ctx.recipe.patches:
        if p.component == ctx.apex.name and p.kind in ("replace", "regex") and \
                f"{APEX_CHECK}(CUDA_HOME)" in (p.old or ""):
            return (f"patch '{p.id}' looks for '{APEX_CHECK}(CUDA_HOME)', but {name} still calls it "
                    f"with torch.utils.cpp_extension.CUDA_HOME: the replacement matches nothing")
    return None


def _apex_date(ctx: Context) -> tuple[str, str] | None:
    if not ctx.apex or not ctx.torch:
        return None
    row, name = cm.apex_commit(ctx.apex)
    return (row.date, name) if row else None


def _apex_torch_library(ctx: Context) -> str | None:
    d = _apex_date(ctx)
    if d and d[0] >= cm.APEX_TORCH_LIBRARY and version_lt(ctx.torch.version, "2.4"):
        return f"{d[1]} probes torch.library.custom_op, which torch {ctx.torch.version} lacks"
    return None


def _apex_torch_six(ctx: Context) -> str | None:
    d = _apex_date(ctx)
    if d and d[0] <= cm.APEX_TORCH_SIX_LAST and not version_lt(ctx.torch.version, "2.0"):
        return f"{d[1]} imports torch._six, which torch {ctx.torch.version} (>= 2.0) no longer has"
    return None


def _apex_too_new(ctx: Context) -> str | None:
    d = _apex_date(ctx)
    if d and d[0] >= cm.APEX_OLD_TORCH_DROPPED and version_lt(ctx.torch.version, "1.9"):
        return f"{d[1]} is newer than Apex's support for torch {ctx.torch.version} (dropped by 2023)"
    return None


def _apex_unknown(ctx: Context) -> str | None:
    if not ctx.apex or cm.apex_commit(ctx.apex)[0]:
        return None
    return f"{cm.apex_commit(ctx.apex)[1]}: not in the Apex commit table; date-based checks skipped"


def _pip_syntax(ctx: Context) -> str | None:
    if not ctx.apex or not ctx.apex_options or ctx.container:
        return None
    row, name = cm.apex_commit(ctx.apex)
    if row is None:
        return None
    spec = ctx.recipe.environment.pip
    modern_pip = admits(spec, "23.1") or admits(spec, "25.3")
    if row.date < cm.APEX_PYPROJECT:
        if spec and not modern_pip:
            return None  # pip < 23.1: the plan passes --global-option, as published
        return (f"{name} predates Apex's pyproject (2023-06-12) and pip {spec or '(unpinned)'} admits "
                f">= 23.1, which deprecated --global-option and dropped the setup.py install fallback; "
                f"plan's choice: `python setup.py {' '.join(ctx.apex_options)} bdist_wheel` in the tree, "
                f"then pip installs the wheel (envbuild.patches.apex_build)")
    if spec and not modern_pip:
        return (f"{name} has a pyproject (documented with --config-settings, pip >= 23.1) but the recipe "
                f"pins pip {spec}; plan's choice: --global-option with --no-build-isolation")
    return None


def _fast_mha_removed(ctx: Context) -> str | None:
    used = [o for o in ctx.apex_options if o in ("--fast_multihead_attn", "--fmha")]
    row = cm.apex_commit(ctx.apex)[0] if ctx.apex else None
    if used and row and row.date >= cm.APEX_FAST_MHA_REMOVED:
        return f"{cm.apex_commit(ctx.apex)[1]} no longer accepts {', '.join(used)} (removed 2026-07-08)"
    return None


def _fast_mha_git(ctx: Context) -> str | None:
    if "--fast_multihead_attn" not in ctx.apex_options or _fast_mha_removed(ctx):
        return None
    off = [cc for cc in ctx.facts.archs if not ca.binary_runs(["7.0", "8.0", "8.6"], [], cc)]
    msg = ("--fast_multihead_attn runs `git submodule update --init` for cutlass at build time "
           "(needs a git checkout and network)")
    if off:
        msg += "; its kernels are built for sm_70/sm_80/sm_86 only, not " + ", ".join(ca.sm(c) for c in off)
    return msg


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


METASEQ_POST_V3 = (cm.METASEQ_V3_SWITCH, "78e15df5", "4de251ffca9a0717561f22bd721ee1ba7a8a5783",
                   "f7ffa5fd61cf90f498a36d365c13dd7f1a912ff7")


def _metaseq_megatron(ctx: Context) -> str | None:
    megatron = [s for s in ctx.recipe.sources if cm.is_fairseq_v2(s) or cm.is_fairseq_v3(s)]
    for ms in ctx.sources_where(cm.is_metaseq):
        sha = ms.sha or ""
        for mg in megatron:
            if sha == cm.METASEQ_A1A4E733 and cm.is_fairseq_v3(mg):
                return (f"metaseq a1a4e733 predates the switch to Megatron fairseq_v3 (5ca60055); "
                        f"{mg.name} is fairseq_v3")
            if any(sha.startswith(p[:8]) for p in METASEQ_POST_V3) and cm.is_fairseq_v2(mg):
                return f"metaseq {sha[:8]} needs Megatron fairseq_v3 (#460, #523); {mg.name} is fairseq_v2"
    return None


SKLEARN_ENV = "SKLEARN_ALLOW_DEPRECATED_SKLEARN_PACKAGE_INSTALL"


def _sklearn(ctx: Context) -> str | None:
    for ms in ctx.sources_where(cm.is_metaseq):
        if ms.install == "none" or (ms.sha != cm.METASEQ_A1A4E733
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


PINS = "shared/docs/PINS.md"

RULES: list[Rule] = [
    Rule("nvcc-missing", "error", "CUDA extensions are built but the node has no nvcc",
         "Apex --cuda_ext, DeepSpeed ops and Megatron fused kernels are compiled with nvcc on the node",
         "https://github.com/NVIDIA/apex#linux", "install the CUDA toolkit matching torch's CUDA (or use "
         "a devel container image)", _nvcc_missing),
    Rule("cuda-ext-with-cpu-torch", "error", "CUDA extensions are built against a CPU-only torch",
         "torch.utils.cpp_extension has no CUDA (torch.version.cuda is None): Apex --cuda_ext and "
         "Megatron's fused kernels cannot be compiled or loaded", "https://github.com/NVIDIA/apex#linux",
         "use a CUDA torch variant (cuda: auto on a GPU node, or a fixed cuXXX tag)", _cpu_torch),
    Rule("nvcc-too-old-for-gpu", "error", "the node's CUDA toolkit cannot target its GPU",
         "nvcc only emits SASS for archs it knows (sm_90 needs CUDA 11.8)", ca.ZENN_TABLE,
         "install a CUDA toolkit new enough for the GPU (and a torch built with it)", _nvcc_too_old),
    Rule("nvcc-major-mismatch", "error", "nvcc major != torch's CUDA major: extensions cannot be built",
         "torch's BuildExtension raises CUDA_MISMATCH_MESSAGE on a major mismatch and Apex's "
         f"{APEX_CHECK} refuses any mismatch; mixing CUDA majors in one process is unsupported",
         "https://github.com/NVIDIA/apex/commit/50689f6a", "install nvcc of torch's CUDA major, or pick a "
         "torch tag of the node's major (cuda: auto)", _major_mismatch),
    Rule("nvcc-minor-mismatch", "warning", "nvcc and torch CUDA share the major, differ in minor",
         "BuildExtension only warns on a minor mismatch and CUDA minor versions are compatible; Apex's "
         "exact check is relaxed by an apex-cuda-check patch (the Azure OPT doc's sed)",
         "https://github.com/yosoyjay/cyclecloud-llm/blob/d8b78383006ae0ceee5d500e768905f6bf8a1f8b/opt-175b/README.md",
         "none needed; or install nvcc matching torch's CUDA exactly", _minor_mismatch),
    Rule("apex-check-unpatched", "error", "Apex refuses a minor CUDA mismatch and no patch relaxes it",
         f"since 50689f6a (2019-05) Apex's {APEX_CHECK} raises on any major or minor difference; there "
         "is no opt-out flag (PR #997 never merged)", "https://github.com/NVIDIA/apex/pull/997",
         "add a patch of kind apex-cuda-check on the Apex source", _apex_unpatched),
    Rule("apex-sed-noop", "error", "the Azure sed on Apex's setup.py does not match this Apex commit",
         "before 9ce0a10f (2021-09-08) the call is check_...(torch.utils.cpp_extension.CUDA_HOME)",
         "https://github.com/NVIDIA/apex/commit/9ce0a10f", "use the apex-cuda-check patch kind, which "
         "finds the check by name", _apex_sed_noop),
    Rule("apex-needs-torch-library", "error", "Apex from Dec 2024 on needs torch.library.custom_op",
         "apex.normalization probes torch.library.custom_op (2863aa02/73375b3b) -> AttributeError on old "
         "torch (inference: custom_op appeared in torch 2.4)", "https://github.com/NVIDIA/apex/issues/1868",
         "pin an Apex commit from the NGC container of your torch's era", _apex_torch_library),
    Rule("apex-torch-six", "error", "Apex imports torch._six, removed in torch 2.0",
         "apex/amp/_initialize.py imports torch._six.string_classes (static check of 265b451d; older "
         "commits assumed the same)", "NVIDIA/apex@265b451d:apex/amp/_initialize.py",
         "pin Apex >= 52e18c89 (used with torch 2.0.1 at ALCF) for torch >= 2.0", _apex_torch_six),
    Rule("apex-too-new-for-torch", "error", "Apex commit too new for the torch version",
         "maintainers: master in 2023 no longer supports torch 1.7/1.8 ('1.8.1 would be a bit too old')",
         "https://github.com/NVIDIA/apex/issues/1653", "pin an Apex commit of 2021 to mid-2022 "
         "(e.g. 265b451d or 22.04-dev) for torch 1.8", _apex_too_new),
    Rule("apex-commit-unknown", "warning", "Apex commit not in the commit table",
         "date-based Apex x torch rows cannot be evaluated", "envbuild/compat/commits.py",
         "pin a known Apex SHA or add the commit and its date to envbuild/compat/commits.py", _apex_unknown),
    Rule("apex-pip-option-syntax", "warning", "pip version vs Apex's build-option syntax",
         "pip 23.1 deprecated --global-option/--build-option and dropped the setup.py install fallback; "
         "Apex >= 2d8302a6 (2023-06-12) documents --config-settings with --no-build-isolation",
         "https://github.com/NVIDIA/apex/commit/2d8302a6", "pin environment.pip to '<23.1' for old Apex, "
         "or build with setup.py directly; pip >= 23.1 for new Apex", _pip_syntax),
    Rule("apex-fast-mha-removed", "error", "--fast_multihead_attn/--fmha removed from Apex master",
         "526871a2 (#2016, 2026-07-08) removed these extensions; setup.py rejects the options",
         "https://github.com/NVIDIA/apex/pull/2016", "pin an older Apex SHA or drop the options",
         _fast_mha_removed),
    Rule("apex-fast-mha-git", "warning", "--fast_multihead_attn needs a git checkout at build time",
         "its setup step runs git submodule update for cutlass and builds sm_70/80/86 only",
         "NVIDIA/apex@265b451d:setup.py", "build from a git clone with network, or drop the option",
         _fast_mha_git),
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
         "https://github.com/facebookresearch/metaseq/issues/523", "a1a4e733 -> fairseq_v2; >= 5ca60055 "
         "-> fairseq_v3 (fa6c0860)", _metaseq_megatron),
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
    Rule("numpy2-torch1", "error", "NumPy 2 with a torch 1.x wheel",
         "torch 1.x wheels are compiled against the NumPy 1.x ABI ('A module that was compiled using "
         "NumPy 1.x cannot be run in NumPy 2.x')", "https://github.com/xai4space/meteors/issues/20",
         "pin numpy '<2'", _numpy2),
]
