"""Same-GPU references: runs recorded on a GPU model and count are the yardstick for later runs.

``references.json`` (shipped in the package: docs/ is not in the wheel) holds one reference per
recipe, GPU model and GPU count, each a list of runs recorded in docs/results with their raw
output: the record's path under docs/results, its sha256, the file naming the GPU (the node's
facts.json or the report written on the node), the value the recipe's parser reads from the
record, and who else used the node while it ran (``tenancy``). No figure is typed in by hand:
tests/smoke/test_references.py recomputes every value, sha256, GPU model and count from the raw
records (``ENVBUILD_UPDATE_GOLDEN=1`` writes them).

The rule (``envbuild.smoke.repeat``) compares a later run with the median of a reference's runs,
allowing the run-to-run spread those runs themselves show, never less than ``FLOOR``; a
reference needs ``MIN_RUNS`` runs before its spread counts as measured.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, replace
from functools import cache

from envbuild.shipped import REFERENCES_FILE
from envbuild.smoke.hardware import comparison

SCHEMA = "envbuild.references/2"
TABLE = REFERENCES_FILE.name


@dataclass(frozen=True)
class Run:
    """One recorded run of a reference: ``record`` and ``facts`` are paths under docs/results."""

    record: str
    sha256: str
    facts: str
    value: float
    tenancy: str = ""  # who else used the node's GPUs or CPUs during the run ("alone" when nobody)

    def to_dict(self) -> dict:
        return {"facts": self.facts, "record": self.record, "sha256": self.sha256, "tenancy": self.tenancy,
                "value": self.value}


@dataclass(frozen=True)
class Reference:
    """The runs of ``recipe`` recorded on ``gpus`` x ``gpu`` (the model as nvidia-smi names it)."""

    recipe: str
    gpu: str
    gpus: int
    metric: str
    runs: tuple[Run, ...]

    @property
    def values(self) -> list[float]:
        return [r.value for r in self.runs]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def spread(self) -> float | None:
        """The runs' range as a share of their median (None: one run, no spread measured)."""
        if len(self.runs) < 2 or not self.median:
            return None
        return (max(self.values) - min(self.values)) / abs(self.median)

    @property
    def deviation(self) -> float | None:
        """How far the farthest run lies from the median, as a share of it (None: one run)."""
        if len(self.runs) < 2 or not self.median:
            return None
        return max(abs(v - self.median) for v in self.values) / abs(self.median)

    @property
    def records(self) -> list[str]:
        return [r.record for r in self.runs]

    def without(self, sha256: str | None) -> "Reference":
        """This reference less the run whose record has ``sha256`` (a run is never its own yardstick)."""
        return replace(self, runs=tuple(r for r in self.runs if not sha256 or r.sha256 != sha256))

    def holds(self, sha256: str | None) -> bool:
        return bool(sha256) and any(r.sha256 == sha256 for r in self.runs)

    def to_dict(self) -> dict:
        return {"recipe": self.recipe, "gpu": self.gpu, "gpus": self.gpus, "metric": self.metric,
                "runs": [r.to_dict() for r in self.runs]}


def load(text: str) -> tuple[Reference, ...]:
    data = json.loads(text)
    if data.get("schema") != SCHEMA:
        raise ValueError(f"references table schema {data.get('schema')!r}, expected {SCHEMA!r}")
    return tuple(Reference(**{**row, "runs": tuple(Run(**run) for run in row["runs"])})
                 for row in data["references"])


def dump(table: tuple[Reference, ...] | list[Reference]) -> str:
    """The table as references.json holds it: one line per run, keys sorted."""
    out = ['{', f'  "schema": "{SCHEMA}",', '  "references": [']
    for i, ref in enumerate(table):
        head = {k: v for k, v in ref.to_dict().items() if k != "runs"}
        out.append("    " + json.dumps(head, sort_keys=True)[:-1] + ', "runs": [')
        out.append(",\n".join("      " + json.dumps(r.to_dict(), sort_keys=True) for r in ref.runs))
        out.append("    ]}" + ("," if i < len(table) - 1 else ""))
    out += ["  ]", "}", ""]
    return "\n".join(out)


@cache
def references() -> tuple[Reference, ...]:
    """Every shipped reference (the package's references.json)."""
    return load(REFERENCES_FILE.read_text(encoding="utf-8"))


def runs() -> list[tuple[Reference, Run]]:
    """Every recorded run of every shipped reference, with its reference."""
    return [(ref, run) for ref in references() for run in ref.runs]


def for_recipe(recipe: str, table: tuple[Reference, ...] | None = None) -> list[Reference]:
    return [r for r in (references() if table is None else table) if r.recipe == recipe]


def on_model(recipe: str, gpu: str | None, table: tuple[Reference, ...] | None = None) -> list[Reference]:
    """The references of ``recipe`` recorded on the model of ``gpu``, whatever their GPU count."""
    return [r for r in for_recipe(recipe, table) if comparison(r.gpu, gpu, "recorded").comparable]


def for_gpu(recipe: str, gpu: str | None, gpus: int | None,
            table: tuple[Reference, ...] | None = None) -> Reference | None:
    """The reference of ``recipe`` recorded on ``gpus`` x the model of ``gpu`` (None: none;
    a reference on another count of the same model does not compare)."""
    return next((r for r in on_model(recipe, gpu, table) if gpus is not None and r.gpus == gpus), None)
