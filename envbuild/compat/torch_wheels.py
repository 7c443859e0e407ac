"""Published torch builds: version x CUDA tag x Python x compiled GPU archs, as rows.

Each row is one variant that exists, with the evidence for it. A version that appears in the
table is listed with *all* of its known variants, so a missing (version, tag) pair means
"never published" (e.g. ``1.10.0+cu116``). Versions absent from the table are unknown, not
wrong. ``choose_variant`` resolves ``cuda: auto`` against node facts.
"""

from __future__ import annotations

from dataclasses import dataclass

from envbuild.cuda_arch import driver_cuda
from envbuild.facts.model import NodeFacts
from envbuild.versions import cuda_of_tag, split_local, vtuple

BUILDER = "https://github.com/pytorch/builder"  # manywheel/build.sh, build_cuda.sh per release branch
LTS_INDEX = "https://download.pytorch.org/whl/lts/1.8/torch_lts.html"
STABLE = "https://download.pytorch.org/whl/{tag}/torch_stable.html"
ISSUE_75992 = "https://github.com/pytorch/pytorch/issues/75992"

CU10 = ("3.7", "5.0", "6.0", "7.0")
CU11_86 = ("3.7", "5.0", "6.0", "7.0", "7.5", "8.0", "8.6")
CU118_90 = CU11_86 + ("9.0",)
PY36_39 = ("3.6", "3.7", "3.8", "3.9")
PY37_310 = ("3.7", "3.8", "3.9", "3.10")
PY38_311 = ("3.8", "3.9", "3.10", "3.11")


@dataclass(frozen=True)
class TorchWheel:
    """One published torch variant.

    ``versions``: exact versions sharing this variant; ``tag``: ``cpu``/``cuNNN``; ``archs``:
    SASS compute capabilities (``TORCH_CUDA_ARCH_LIST``), ``ptx``: archs also shipped as PTX;
    ``index``: find-links page; ``pypi``: plain ``torch==X`` from PyPI installs this variant;
    ``glibc``: minimum glibc of the wheel's platform tag.
    """

    versions: tuple[str, ...]
    tag: str
    pythons: tuple[str, ...]
    archs: tuple[str, ...]
    why: str
    source: str
    ptx: tuple[str, ...] = ()
    index: str | None = None
    pypi: bool = False
    glibc: str | None = None

    @property
    def cuda(self) -> str | None:
        return cuda_of_tag(self.tag)


def _lts(tag: str, archs: tuple[str, ...]) -> TorchWheel:
    return TorchWheel(("1.8.2",), tag, PY36_39, archs, index=LTS_INDEX, glibc="2.17",
                      why="1.8 LTS: cpu/cu102/cu111 only, from the LTS find-links page (not PyPI); "
                          "builder lts/release/1.8 arch lists, no +PTX; pythons cp36-cp39 inferred from "
                          "the pytorch-lts conda channel; glibc 2.17 (manylinux2014 build) is inference",
                      source=f"{BUILDER}/blob/lts/release/1.8/manywheel/build.sh")


def _std(versions: tuple[str, ...], tag: str, pythons: tuple[str, ...], archs: tuple[str, ...],
         why: str, source: str = BUILDER, pypi: bool = False, ptx: tuple[str, ...] = (),
         glibc: str | None = "2.17") -> TorchWheel:
    return TorchWheel(versions, tag, pythons, archs, why=why, source=source, ptx=ptx,
                      index=STABLE.format(tag=tag), pypi=pypi, glibc=glibc)


W18 = ("builder release/1.8: variants cpu/cu101/cu102/cu111, the 11.x arch list 3.7..8.6 without PTX "
       "(as the 1.8 LTS rows); pythons cp36-cp39")
V110 = ("1.10.0", "1.10.1", "1.10.2")
W110 = ("builder release/1.10 knows CUDA 9.x/10.x/11.0/11.1-11.3 only (no cu116); 11.x arch "
        "list 3.7..8.6 without PTX; no cp310 (PyPI cp310 starts at 1.11.0, TESTBED)")
V112 = ("1.12.0", "1.12.1")
W112 = "builder release/1.12 build_cuda.sh branches 10.2/11.3/11.5/11.6; arch lists inferred from 1.10"
V113 = ("1.13.0", "1.13.1")
W113 = "PINS: cu117 arch list stops at 8.6; inference: 1.13 variants cu116/cu117, py3.7-3.10"
V20 = ("2.0.0", "2.0.1")
W20 = "builder release/2.0: cu118 adds 9.0, cu117 stops at 8.6; py3.8-3.11 (inference for pythons)"
V21 = ("2.1.0", "2.1.1", "2.1.2")
W21 = "inference: release/2.1 variants cu118/cu121 with sm_90; 12.x drops 3.7 (not read from builder)"

WHEELS: list[TorchWheel] = [
    _lts("cpu", ()),
    _lts("cu102", CU10),
    _lts("cu111", CU11_86),
    _std(("1.8.0", "1.8.1"), "cpu", PY36_39, (), W18),
    _std(("1.8.0", "1.8.1"), "cu101", PY36_39, CU10, W18),
    _std(("1.8.0", "1.8.1"), "cu102", PY36_39, CU10, W18 + "; PyPI default (inference)", pypi=True),
    _std(("1.8.0", "1.8.1"), "cu111", PY36_39, CU11_86, W18 + "; GPT-NeoX v1.0 Dockerfile:89 installs "
         "torch==1.8.1+cu111 from this index", source=f"{BUILDER}/blob/release/1.8/manywheel/build.sh"),
    _std(("1.9.1",), "cu111", PY36_39, CU11_86,
         "metaseq CI pairs torch 1.9.1+cu111 with CUDA 11.1; arch list inferred from 1.8/1.10",
         source="https://github.com/facebookresearch/metaseq/blob/a1a4e733/.circleci/config.yml"),
    _std(V110, "cpu", PY36_39, (), W110),
    _std(V110, "cu102", PY36_39, CU10, W110 + "; believed to be the PyPI default (not verified)", pypi=True),
    _std(V110, "cu111", PY36_39, CU11_86, W110),
    _std(V110, "cu113", PY36_39, CU11_86, W110 + "; metaseq docs pin 1.10.1+cu113; runs on CUDA 11.4 "
         f"nodes ({ISSUE_75992})", source=f"{BUILDER}/blob/release/1.10/manywheel/build.sh"),
    _std(("1.11.0",), "cpu", PY37_310, (), "inference: 1.11 keeps cpu"),
    _std(("1.11.0",), "cu102", PY37_310, CU10, "inference: PyPI default of 1.11 is cu102", pypi=True),
    _std(("1.11.0",), "cu113", PY37_310, CU11_86, "cyclecloud-llm opt-175b/requirements.txt pins "
         "torch==1.11.0+cu113; arch list inferred (PINS GPU section)",
         source="https://github.com/yosoyjay/cyclecloud-llm/blob/main/opt-175b/requirements.txt"),
    _std(("1.11.0",), "cu115", PY37_310, CU11_86, "inference: 1.11 also shipped cu115"),
    _std(V112, "cpu", PY37_310, (), W112),
    _std(V112, "cu102", PY37_310, CU10, W112 + "; PyPI default cu102 (inference)", pypi=True),
    _std(V112, "cu113", PY37_310, CU11_86, W112),
    _std(V112, "cu116", PY37_310, CU11_86, W112),
    _std(V113, "cpu", PY37_310, (), W113),
    _std(V113, "cu116", PY37_310, CU11_86, W113),
    _std(V113, "cu117", PY37_310, CU11_86, W113 + "; PyPI default (inference)", pypi=True),
    _std(V20, "cpu", PY38_311, (), W20),
    _std(V20, "cu117", PY38_311, CU11_86, W20 + "; PyPI default (inference)", pypi=True),
    _std(V20, "cu118", PY38_311, CU118_90, W20, source=f"{BUILDER}/blob/release/2.0/manywheel/build.sh"),
    _std(V21, "cpu", PY38_311, (), W21),
    _std(V21, "cu118", PY38_311, CU118_90, W21),
    _std(V21, "cu121", PY38_311, CU118_90[1:], W21 + "; PyPI default (inference)", pypi=True),
    TorchWheel(("2.11.0",), "cu130", ("3.10", "3.11", "3.12", "3.13"), ("7.5", "8.0", "8.6", "9.0", "10.0", "12.0"),
               why="captured on the H100 node: torch 2.11.0+cu130 from PyPI (pip list shows 2.11.0), CUDA "
                   "available on sm_90 with Python 3.12; other pythons and the arch list are inference",
               source="shared/fixtures/nodes/h100-ubuntu2404-cuda13/torch-collect-env.txt",
               pypi=True, glibc="2.28"),
    TorchWheel(("2.13.0",), "cpu", ("3.11",), (), pypi=True, glibc="2.28",
               why="CPU torch used by the reference recipe; `pip install torch==2.13.0` on Python 3.11 "
                   "(TESTBED); other pythons not recorded; glibc 2.28 (manylinux_2_28) is inference",
               source="https://pypi.org/project/torch/2.13.0/"),
    # Container images: torch preinstalled by NVIDIA (tag = the image's CUDA).
    TorchWheel(("2.1.0a0+fe05266f",), "cu121", ("3.8",), ("8.0", "8.6", "8.9", "9.0"), ptx=("9.0",),
               why="NGC pytorch:23.04-py3 (Ubuntu 20.04, Python 3.8, CUDA 12.1.0); covers sm_80/89/90 "
                   "(PINS); exact arch list and PTX are inference",
               source="https://github.com/NVIDIA/Megatron-LM/blob/3512ca111dc4a2c905dbbfecce540bddf40e616f/"
                      "tools/retro/README.md"),
    TorchWheel(("1.11.0a0+17540c5",), "cu116", ("3.8",), ("5.2", "6.0", "6.1", "7.0", "7.5", "8.0", "8.6"),
               ptx=("8.6",),
               why="NGC pytorch:22.02-py3: unverified recollection (Python 3.8, CUDA 11.6); arch list inference",
               source="https://docs.nvidia.com/deeplearning/frameworks/pytorch-release-notes/rel_22-02.html"),
]


def variants(version: str) -> list[TorchWheel]:
    """All known variants of ``version`` (local tag ignored); [] when the version is unknown."""
    base = version.strip().removeprefix("==")
    base = base if "a0+" in base else split_local(base)[0]
    return [w for w in WHEELS if base in w.versions]


def find(version: str, tag: str) -> TorchWheel | None:
    """The row for ``version``+``tag``, or None (unknown version or never published)."""
    return next((w for w in variants(version) if w.tag == tag), None)


def node_cuda(facts: NodeFacts) -> tuple[str | None, str]:
    """The CUDA a wheel must fit on this node and which fact gave it (nvcc, else driver)."""
    if facts.nvcc:
        return facts.nvcc, f"nvcc {facts.nvcc}"
    dc = driver_cuda(facts.driver_cuda, facts.driver_version)
    return dc, (f"driver CUDA {dc}" if dc else "no CUDA on the node")


def choose_variant(version: str, cuda: str | None, facts: NodeFacts) -> tuple[str, str]:
    """The wheel tag for torch ``version`` given the recipe's ``cuda`` field, and why.

    ``cuda`` is a fixed tag (``"cu111"``, ``"cpu"``), ``"auto"``, or None (the PyPI default).
    ``auto`` picks, among the published CUDA variants, the same major as the node's CUDA (nvcc,
    else driver) with the highest minor not above it: node nvcc 11.4 + torch 1.10.1 -> cu113.
    A node without GPUs gets ``cpu``.

    >>> choose_variant("1.10.1", "auto", facts_with_nvcc_11_4)  # doctest: +SKIP
    ('cu113', 'nvcc 11.4: highest published cu11x <= 11.4 ...')
    """
    base, local = split_local(version)
    if cuda not in (None, "auto"):
        return cuda, f"fixed by the recipe (cuda: {cuda})"
    if local:
        return local, f"fixed by the version's local tag (+{local})"
    rows = variants(base)
    if cuda is None:
        default = next((w for w in rows if w.pypi), None)
        if default:
            return default.tag, f"the PyPI build of torch {base} is its {default.tag} variant (source: {default.source})"
        return "pypi", f"PyPI default build of torch {base}; its CUDA variant is not in the table"
    if not facts.gpus:
        return "cpu", "cuda: auto on a node without GPUs"
    have, what = node_cuda(facts)
    cuda_rows = [w for w in rows if w.cuda]
    if not cuda_rows:
        raise LookupError(f"torch {base} has no CUDA variant in the table")
    if have is None:
        best = max(cuda_rows, key=lambda w: vtuple(w.cuda))
        return best.tag, f"{what}; took the newest published variant {best.tag}"
    fits = [w for w in cuda_rows if vtuple(w.cuda)[0] == vtuple(have)[0] and vtuple(w.cuda) <= vtuple(have)]
    if fits:
        best = max(fits, key=lambda w: vtuple(w.cuda))
        why = f"{what}: highest published cu{vtuple(have)[0]}x <= {have} is {best.tag}"
        if best.cuda != ".".join(map(str, vtuple(have)[:2])):
            why += (f"; a CUDA {best.cuda} wheel runs on a CUDA {have} node (same major, older minor, "
                    f"{ISSUE_75992})")
        return best.tag, why
    lower = [w for w in cuda_rows if vtuple(w.cuda) <= vtuple(have)]
    best = max(lower or cuda_rows, key=lambda w: vtuple(w.cuda))
    return best.tag, (f"{what}: torch {base} has no variant of CUDA major {vtuple(have)[0]}; "
                      f"nearest is {best.tag} (CUDA {best.cuda})")
