"""The apex-patch flow: Apex's CUDA check in a checkout decided, and with ``apply`` relaxed.

``apex_patch(ApexRequest(...)) -> ApexOutcome``: ``envbuild.patches.apex.patch_tree`` decides
for the nvcc and torch CUDA pair (unchanged, patched, cpu-only or refused) and, with ``apply``,
writes setup.py atomically; the outcome holds its report and the command's exit code.
"""

from __future__ import annotations

from dataclasses import dataclass

from envbuild.patches.apex import PatchReport

# envbuild apex-patch's exit status for each decision (a refusal is 1; bad input raises, 2)
EXIT = {"unchanged": 0, "patched": 0, "cpu-only": 0, "refused": 1}


@dataclass(frozen=True)
class ApexRequest:
    """``source_dir`` an Apex checkout; ``nvcc`` the node's nvcc CUDA (``none`` if absent);
    ``torch_cuda`` torch.version.cuda of the wheel; ``cuda_ext`` False when only --cpp_ext is
    built (no CUDA check); ``apply`` write setup.py (else a dry run)."""

    source_dir: str
    nvcc: str
    torch_cuda: str
    cuda_ext: bool = True
    apply: bool = False


@dataclass(frozen=True)
class ApexOutcome:
    """The decision, its reason, fix and diff, and whether setup.py was written
    (``envbuild.patches.apex.PatchReport``)."""

    report: PatchReport

    @property
    def exit_code(self) -> int:
        """0 unchanged, patched or cpu-only; 1 refused."""
        return EXIT[self.report.decision]

    def to_dict(self) -> dict:
        return self.report.to_dict()


def apex_patch(request: ApexRequest) -> ApexOutcome:
    """Decide, and with ``apply`` write. InputError when the folder has no setup.py or is not Apex."""
    from envbuild.patches.apex import patch_tree

    return ApexOutcome(patch_tree(request.source_dir, request.nvcc, request.torch_cuda, request.apply,
                                  cuda_ext=request.cuda_ext))
