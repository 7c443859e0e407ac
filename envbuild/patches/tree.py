"""Apply one recipe ``Patch`` to a source tree (controller side): read, patch, diff, write."""

from __future__ import annotations

from pathlib import Path

from envbuild.errors import CheckFailed, InputError
from envbuild.fsio import write_atomic
from envbuild.node.textpatch import apply_text_patch, unified_diff
from envbuild.patches.apex import Outcome, PatchReport, patch_tree


def apply_patch(patch, src_dir: str | Path, *, apply: bool = False, nvcc: str | None = None,
                torch_cuda: str | None = None, cuda_ext: bool = True) -> PatchReport:
    """Apply ``patch`` (an ``envbuild.recipes.schema.Patch``) to ``src_dir``.

    ``apex-cuda-check`` patches go through :func:`patch_tree` (needs ``nvcc``/``torch_cuda``);
    the others through :func:`apply_text_patch`. A patch that does not fit raises CheckFailed
    naming the patch id and its reason; nothing is written then.
    """
    if patch.kind == "apex-cuda-check":
        return patch_tree(src_dir, nvcc, torch_cuda, apply, cuda_ext=cuda_ext)
    path = Path(src_dir) / patch.file
    if not path.is_file():
        raise InputError(f"patch {patch.id}: {path} does not exist",
                         hint=f"check 'file' of patch {patch.id!r} against the pinned commit of {patch.component}")
    text = path.read_text(encoding="utf-8")
    status, new_text = apply_text_patch(text, patch.kind, patch.old, patch.new, patch.count)
    if status.startswith("failed"):
        raise CheckFailed(f"patch {patch.id} ({patch.kind} on {patch.file}) {status}",
                          hint=f"the patch was written for another commit of {patch.component}? ({patch.why})")
    diff = unified_diff(text, new_text, patch.file)
    if apply and new_text != text:
        write_atomic(path, new_text, mode=path.stat().st_mode & 0o777)
    decision: Outcome = "patched" if status in ("applied", "already-applied") and patch.kind != "expect" else "unchanged"
    return PatchReport(decision, f"{patch.id}: {status} ({patch.why})", diff, apply and new_text != text,
                       None, str(path), status)
