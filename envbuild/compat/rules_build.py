"""Rows about compiling CUDA code on the node: nvcc present, new enough, matching torch's CUDA."""

from __future__ import annotations

from envbuild import cuda_arch as ca
from envbuild.compat.context import Context
from envbuild.compat.rule import Rule
from envbuild.versions import vtuple


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
]
