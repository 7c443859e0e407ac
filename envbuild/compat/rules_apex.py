"""Rows about the pinned NVIDIA Apex commit: its era vs torch, its setup.py check, pip option syntax."""

from __future__ import annotations

from envbuild.compat import commits as cm
from envbuild import cuda_arch as ca
from envbuild.compat.context import Context
from envbuild.compat.rule import Rule
from envbuild.compat.rules_build import APEX_CHECK
from envbuild.patches.apex import parse_cuda
from envbuild.patches.apex_options import submodules_for
from envbuild.versions import admits, version_lt


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

    # the submodules the plan checks out with Apex (envbuild.plan.build:_submodules reads the
    # same table), so the message names what the git step really fetches
    subs = submodules_for(ctx.apex_options)
    paths = ", ".join(path for path, _ in subs)
    urls = ", ".join(url for _, url in subs)
    msg = (f"--fast_multihead_attn builds from the submodule {paths}; envbuild checks it out with "
           f"Apex, before setup.py's own `git submodule update`, from the git mirror's or the bundle's "
           f"copy of {urls} when given, otherwise from that URL (needs the network)")
    off = [cc for cc in ctx.facts.archs if not ca.binary_runs(["7.0", "8.0", "8.6"], [], cc)]
    if off:
        msg += "; its kernels are built for sm_70/sm_80/sm_86 only, not " + ", ".join(ca.sm(c) for c in off)
    return msg


def _apex_cuda13_sm70(ctx: Context) -> str | None:
    d = _apex_date(ctx) if ctx.apex else None
    if not d or "--cuda_ext" not in ctx.apex_options or not cm.APEX_SM70_FLAGS_SINCE <= d[0] < cm.APEX_NO_SM70_FLAGS:
        return None

    nvcc = parse_cuda(ctx.facts.nvcc, "nvcc") if ctx.facts.nvcc else None
    if not nvcc or nvcc < (13, 0):
        return None
    return (f"{d[1]} builds fused_weight_gradient_mlp_cuda with -gencode arch=compute_70,code=sm_70 "
            f"under --cuda_ext, and nvcc {ctx.facts.nvcc} cannot target sm_70 (CUDA 13 supports Turing "
            "sm_75 and newer): the Apex build stops there")


RULES: list[Rule] = [
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
    Rule("apex-cuda13-sm70", "error", "this Apex commit cannot be built with nvcc 13",
         "from ddc08039 (2022-02-25) to 26bba57d (2025-08-21) setup.py adds -gencode "
         "arch=compute_70,code=sm_70 to fused_weight_gradient_mlp_cuda for every CUDA >= 11.0; CUDA 13.0 "
         "dropped Maxwell, Pascal and Volta (it supports Turing to Blackwell)",
         "NVIDIA/apex@52e18c894223800cb611682dce27d88050edf1de:setup.py; "
         "https://docs.nvidia.com/cuda/cuda-features-archive/index.html",
         "pin Apex >= 26bba57d (e.g. 6424da3b, built on an H100 with nvcc 13.0), or use a CUDA 12 toolkit",
         _apex_cuda13_sm70),
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
    Rule("apex-fast-mha-git", "warning", "--fast_multihead_attn reads Apex's cutlass submodule",
         "its setup.py runs `git submodule update --init` for cutlass at build time and builds sm_70/80/86 "
         "only; envbuild checks the submodule out with the Apex checkout (envbuild.plan.build:_submodules)",
         "NVIDIA/apex@265b451d:setup.py", "offline: --git-mirror holding NVIDIA/cutlass, or --bundle; "
         "for other GPUs drop the option",
         _fast_mha_git),
]
