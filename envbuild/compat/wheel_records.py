"""Published wheels whose own RECORD is wrong for some of their files: data, not code.

envbuild checks every installed file against its distribution's RECORD (``DistsEffect``,
``envbuild.node.effects.check_record``). A few wheels were edited after their RECORD was
written (PyPI's torch 1.10.1: its dist-info/METADATA is 24828 bytes, its RECORD says 24834),
so pip installs a file that never matched. The row names the wheel by its sha256 (the lock's
hash, which pip checks), so only that exact file is excused, and only for the paths listed;
every other file of it is still checked.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RecordDefect:
    dist: str  # canonical distribution name
    wheel: str  # the file name, for people
    paths: tuple[str, ...]  # RECORD paths whose size/hash differ in the published wheel itself
    why: str
    source: str


RECORD_DEFECTS: dict[str, RecordDefect] = {
    "cca660b27a90dbbc0af06c859260f6b875aef37c0897bd353e5deed085d2c877": RecordDefect(
        dist="torch", wheel="torch-1.10.1-cp39-cp39-manylinux1_x86_64.whl",
        paths=("torch-1.10.1.dist-info/METADATA",),
        why="the wheel's METADATA is 24828 bytes, its own RECORD says 24834 (read from the "
            "wheel: zipfile info vs RECORD row); found by the CPU import proof of opt-175b-azure",
        source="https://pypi.org/project/torch/1.10.1/#files"),
    "e7ad1649adb7dc2a450e70a3e51240b84fa4746c69c8f98989ce0c254f9fba3a": RecordDefect(
        dist="torch", wheel="torch-1.8.1-cp38-cp38-manylinux1_x86_64.whl",
        paths=("torch-1.8.1.dist-info/METADATA",),
        why="the wheel's METADATA is 23676 bytes, its own RECORD says 23682 (read from the "
            "wheel: zipfile info vs RECORD row); found by the CPU import proof of alpa-megatron, "
            "whose lock records this wheel as the stand-in for torch 1.8.2",
        source="https://pypi.org/project/torch/1.8.1/#files"),
    "bdd2b45bf079d9ad90377048e2747a0c82351989a2165821f0c96831b4a2a54b": RecordDefect(
        dist="numpy", wheel="numpy-1.26.3-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        paths=("numpy/distutils/__pycache__/conv_template.cpython-310.pyc",),
        why="the wheel ships a .pyc of conv_template.py compiled elsewhere (8269 bytes, in its "
            "RECORD); pip compiles the .py at install and replaces it (8329 bytes here), so the "
            "installed file never matches (read from the wheel); found by the CPU import proof "
            "of polaris-megatron-deepspeed",
        source="https://pypi.org/project/numpy/1.26.3/#files"),
}


def record_defects(dist: str, hashes: list[str] | tuple[str, ...]) -> list[str]:
    """RECORD paths excused for ``dist`` installed from a wheel with one of ``hashes``."""
    rows = [RECORD_DEFECTS[h] for h in hashes if h in RECORD_DEFECTS and RECORD_DEFECTS[h].dist == dist]
    return sorted({p for r in rows for p in r.paths})
