"""Same-GPU references: a recorded run is the yardstick for later runs on its GPU model.

``references.json`` (shipped in the package: docs/ is not in the wheel) holds, per recipe, the
runs recorded in docs/results with their raw output: the GPU model and count they ran on, the
record's path under docs/results, its sha256, the file naming the GPU (the node's facts.json or
the report written on the node) and the value the recipe's parser reads from the record. No
figure is typed in by hand: tests/test_references.py recomputes every value, sha256, GPU model
and count from the raw records (``ENVBUILD_UPDATE_GOLDEN=1`` writes them).

A later run on a referenced GPU model PASSes at ``SHARE`` (95 %) of the reference or better, as
NVIDIA's DGX Cloud Benchmarking (Exemplar) recipes require of a run against their published
one, and FAILs below (``envbuild.smoke.judge``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache

from envbuild.shipped import REFERENCES_FILE
from envbuild.smoke.hardware import comparison

SHARE = 0.95  # a run PASSes at >= 95 % of the reference for its GPU model
TABLE = REFERENCES_FILE.name


@dataclass(frozen=True)
class Reference:
    """One recorded run: ``record`` and ``facts`` are paths under docs/results."""

    recipe: str
    gpu: str  # as nvidia-smi names it
    gpus: int
    metric: str
    value: float
    record: str
    sha256: str
    facts: str

    def to_dict(self) -> dict:
        return {"recipe": self.recipe, "gpu": self.gpu, "gpus": self.gpus, "metric": self.metric,
                "value": self.value, "record": self.record, "sha256": self.sha256, "facts": self.facts}


def load(text: str) -> tuple[Reference, ...]:
    data = json.loads(text)
    return tuple(Reference(**row) for row in data["references"])


@cache
def references() -> tuple[Reference, ...]:
    """Every shipped reference (the package's references.json)."""
    return load(REFERENCES_FILE.read_text(encoding="utf-8"))


def for_recipe(recipe: str, table: tuple[Reference, ...] | None = None) -> list[Reference]:
    return [r for r in (references() if table is None else table) if r.recipe == recipe]


def for_gpu(recipe: str, gpu: str | None, gpus: int | None = None,
            table: tuple[Reference, ...] | None = None) -> Reference | None:
    """The reference of ``recipe`` recorded on the model of ``gpu``: the one on as many GPUs
    as ``gpus`` where there is one, else the first on that model (None: none there)."""
    same_model = [r for r in for_recipe(recipe, table) if comparison(r.gpu, gpu, "recorded").comparable]
    return next((r for r in same_model if gpus is not None and r.gpus == gpus), None) or \
        next(iter(same_model), None)
