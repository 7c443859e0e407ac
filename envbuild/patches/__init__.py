"""Declarative patches and the CUDA-aware Apex build.

* :mod:`envbuild.node.textpatch` - stdlib-only text patches (also shipped to nodes):
  ``apply_text_patch``, ``unified_diff``, ``neutralize_apex_cuda_check``.
* :mod:`envbuild.patches.apex` - ``decide(nvcc, torch_cuda)`` and ``patch_tree(src, ...)``.
* :mod:`envbuild.patches.apex_options` - the dated table of Apex build options.
* :mod:`envbuild.patches.apex_build` - ``arch_list``, ``build_jobs``, ``install_command``,
  ``cache_key``.
"""

from envbuild.node.textpatch import apply_text_patch, neutralize_apex_cuda_check, unified_diff
from envbuild.patches.apex import ApexDecision, PatchReport, decide, patch_tree
from envbuild.patches.apex_build import arch_list, build_jobs, cache_key, install_command

__all__ = [
    "ApexDecision", "PatchReport", "decide", "patch_tree", "arch_list", "build_jobs", "cache_key",
    "install_command", "apply_text_patch", "neutralize_apex_cuda_check", "unified_diff",
]
