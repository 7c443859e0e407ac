"""Published wheels whose own RECORD is wrong for some of their files: data, not code.

envbuild checks every installed file against its distribution's RECORD (``DistsEffect``,
``envbuild.actions.onnode.check_record``). A few wheels were edited after their RECORD was
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
}


def record_defects(dist: str, hashes: list[str] | tuple[str, ...]) -> list[str]:
    """RECORD paths excused for ``dist`` installed from a wheel with one of ``hashes``."""
    rows = [RECORD_DEFECTS[h] for h in hashes if h in RECORD_DEFECTS and RECORD_DEFECTS[h].dist == dist]
    return sorted({p for r in rows for p in r.paths})
