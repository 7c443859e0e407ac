"""What stands in, on a CPU test node, for the packages a lock does not install from a reachable
source: those an image, module or base environment provides (``preinstalled``) and those pinned
on an index this machine cannot reach. The lock records the answer per entry (``stand_in``);
only the CPU import proof (``envbuild.testbed.importproof``) installs it.

The rule: PyPI's release of the same version (its manylinux torch wheels are CUDA builds that
run on a CPU-only node). Where the pinned build has no public release of the same version, a
row of ``STAND_INS`` names the nearest public one and says why; where nothing public can stand
in (NVIDIA's Apex, Transformer Engine, an MPI built for the site), the row says so, the proof
names the package as not exercised; a row does the same for a package the plan installs that is
a CUDA extension only (flash-attn). Rows are data: when (package, pinned version), what stands
in, why, source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from envbuild.lock.schema import StandIn, normalize

NGC_APEX = ("NVIDIA Apex as the image or module builds it (its C++/CUDA extensions need nvcc and a "
            "CUDA torch); PyPI's project named apex is an unrelated package")
APEX_CONTAINERS = ("https://github.com/NVIDIA/apex/blob/6424da3b4faa6c8f062da4a48c424fff3f02d42d/"
                   "README.md#containers")
POLARIS_MODULE = ("https://github.com/argonne-lcf/conda_install_scripts/blob/"
                  "70e22794332ff60e71d08d74e9a5149899cab666/alcf_polaris/install_datascience_conda.sh")


@dataclass(frozen=True)
class StandInRow:
    name: str
    pinned: str  # the version the recipe pins, as written ("1.11.0a0+17540c5", "*")
    stand_in: str | None  # PyPI's version; None: nothing public stands in
    why: str
    source: str


STAND_INS: tuple[StandInRow, ...] = (
    StandInRow("torch", "1.8.2", "1.8.1",
               "a different patch version: 1.8.2 (LTS) is published on download.pytorch.org only, "
               "unreachable here; 1.8.1 is PyPI's newest 1.8 release",
               "https://pypi.org/project/torch/1.8.1/"),
    StandInRow("torch", "1.11.0a0+17540c5", "1.11.0",
               "the image's build is a pre-release of the 1.11 line (commit 17540c5); PyPI's "
               "1.11.0 is that line's public release",
               "https://pypi.org/project/torch/1.11.0/"),
    StandInRow("torch", "2.1.0a0+fe05266f", "2.1.0",
               "the image's build is a pre-release of the 2.1 line (commit fe05266f); PyPI's "
               "2.1.0 is that line's public release",
               "https://pypi.org/project/torch/2.1.0/"),
    StandInRow("torchvision", "*", "0.16.0",
               "the recipe does not record the image's build; PyPI's 0.16.0 is the release made "
               "for torch 2.1.0, the stand-in torch",
               "https://pypi.org/project/torchvision/0.16.0/"),
    StandInRow("numpy", "*", "1.22.2",
               "the recipe does not record the image's numpy; 1.22.2 is the release current "
               "when the image (22.02) was tagged",
               "https://pypi.org/project/numpy/1.22.2/"),
    StandInRow("apex", "0.1", None, NGC_APEX, APEX_CONTAINERS),
    StandInRow("mpi4py", "*", None,
               "the module's mpi4py is built against Cray MPICH for CUDA-aware MPI "
               "(MPICC='cc -shared -target-accel=nvidia80' pip install --no-binary=mpi4py); no "
               "MPI here to build one against",
               POLARIS_MODULE),
    StandInRow("wandb", "*", "0.15.11",
               "the module installs wandb unpinned on the day it was built (2023-10-04); "
               "0.15.11 was current that morning (0.15.12 came out that afternoon)",
               "https://pypi.org/project/wandb/0.15.11/"),
    StandInRow("transformers", "*", "4.34.0",
               "the module installs transformers unpinned; 4.34.0 (2023-10-03) was current from the "
               "module's date (2023-10-04) to its last build commit (2023-10-11); 4.34.1 came 2023-10-18",
               "https://pypi.org/project/transformers/4.34.0/"),
    StandInRow("flash-attn", "2.4.2", None,
               "a CUDA extension: its sdist compiles CUDA kernels with nvcc against a CUDA torch "
               "(FLASH_ATTENTION_FORCE_BUILD); nothing of it builds or imports on a CPU node",
               "https://pypi.org/project/flash-attn/2.4.2/"),
    StandInRow("transformer-engine", "*", None,
               "NVIDIA Transformer Engine as the image builds it against its CUDA; the recipe "
               "does not record its version",
               "https://github.com/OpenSQZ/MegatronApp/blob/1bed2a7202162d6eb2725e9769632a682021a6fb/"
               "requirements.txt"),
)


def row_for(name: str, pinned: str | None) -> StandIn | None:
    """The table's answer for ``name`` pinned at ``pinned``; None when no row names it."""
    for row in STAND_INS:
        if pinned is not None and normalize(row.name) == normalize(name) \
                and row.pinned == pinned.strip():
            return StandIn(version=row.stand_in, why=row.why, source=row.source)
    return None


def stand_in(name: str, pinned: str, on_pypi: Callable[[str, str], bool]) -> StandIn:
    """What stands in for ``name`` ``pinned``: the table's row, else PyPI's same version when
    ``on_pypi(name, version)`` says PyPI has it, else nothing (with why)."""
    if (row := row_for(name, pinned)) is not None:
        return row
    version = pinned.strip()
    if "+" not in version and version not in ("", "*") and on_pypi(name, version):
        return StandIn(version=version, why="PyPI's release of the same version",
                       source=f"https://pypi.org/project/{normalize(name)}/{version}/")
    return StandIn(version=None, why=f"PyPI has no release {version} of {name} and no row names "
                                     "a public stand-in", source="https://pypi.org/")
