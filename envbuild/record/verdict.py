"""The verdict on a benchmark run, as the run folder holds it (``envbuild.smoke.judge`` decides
it; provision's smoke.json, launch's and ``envbuild parse --json`` record it; the report only
shows it).

Its word is one of ``VERDICTS``: ``PASS`` (the run completed and its figure meets what it is
compared with), ``NOT JUDGED`` (completed, nothing on this GPU to compare it with), ``FAIL`` (it
did not complete, or its figure misses) and ``NOTHING FOUND`` (the metric is not in the output).
A verdict written before these models is mapped to them in ``envbuild.record.migrate``.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

PASS: Final = "PASS"
NOT_JUDGED: Final = "NOT JUDGED"
FAIL: Final = "FAIL"
NOTHING_FOUND: Final = "NOTHING FOUND"
VERDICTS = (PASS, NOT_JUDGED, FAIL, NOTHING_FOUND)
Word = Literal["PASS", "NOT JUDGED", "FAIL", "NOTHING FOUND"]
# a whole run's or job's word (run.json's verdict, launch.json's status): a figure NOTHING FOUND is its FAIL
RunWord = Literal["PASS", "NOT JUDGED", "FAIL"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Completion(_Frozen):
    """How the run ended, as its own output shows it (``envbuild.smoke.completion.Completion``)."""

    state: Literal["complete", "stopped", "diverged", "error"]
    detail: str = ""
    planned: int | None = None
    reached: int | None = None
    sources: list[str] = Field(default_factory=list)
    runs: int = 1  # the runs the output holds; the last one is judged

    @property
    def complete(self) -> bool:
        return self.state == "complete"


class Spread(_Frozen):
    """The measured window: the logged values after the warm-up, and their spread."""

    n: int
    median: float
    min: float
    max: float
    warmup: int | None = None  # logged values left out at the start
    what: str = ""  # what one logged value covers (the recipe's benchmark.window)


class Compared(_Frozen):
    """What the figure was compared with: the recipe's ``threshold`` or a same-GPU
    ``reference`` record, the GPU it was measured on (``gpu`` None: any hardware) and the bound
    the run's figure had to meet (``required``, after any normalisation)."""

    kind: Literal["threshold", "reference"]
    value: float  # the threshold, or the reference record's value
    required: float  # the run's figure must be >= (<= when lower is better) this
    gpu: str | None = None
    gpus: int | None = None
    source: str | None = None  # the threshold's citation, or the reference record (under docs/results)
    sha256: str | None = None  # the reference record's (the first run's, for a reference of several)
    share: float | None = None  # of the reference's statistic a run must reach (1 - tolerance)
    normalisation: str | None = None  # how GPU counts were divided out, where they differ
    # a reference of several runs (envbuild.smoke.repeat): its records, the statistic compared
    # with (``value``), the runs' spread and the tolerance taken from it (with its floor)
    runs: list[str] = Field(default_factory=list)
    statistic: str | None = None
    spread: float | None = None
    tolerance: float | None = None
    floor: float | None = None


class Published(_Frozen):
    """The recipe's published figure beside the run's: shown, never judged. ``percent`` (the
    run's figure as a share of it, per GPU when counts differ and the metric is a whole job's)
    only when both were measured on the same GPU model; else ``why`` says why not."""

    value: float
    source: str
    gpu: str | None = None
    gpus: int | None = None
    compared: bool = False
    why: str = ""
    percent: float | None = None
    normalisation: str | None = None


class Verdict(_Frozen):
    """The judge's verdict on one benchmark run (``judge``), as smoke.json, launch.json and
    ``envbuild parse --json`` record it."""

    verdict: Word
    metric: str
    value: float | None = None
    unit: str = ""
    higher_is_better: bool = True
    window: Spread | None = None
    completion: Completion | None = None
    compared: Compared | None = None
    gpu: str | None = None  # the run's GPU model and count, as the judge took them
    gpus: int | None = None
    record: str | None = None  # the judged run's output, where it has a path
    reason: str = ""
    published: Published | None = None  # shown beside the verdict, never part of it

    @property
    def passed(self) -> bool | None:
        """True PASS, None NOT JUDGED, False FAIL or NOTHING FOUND."""
        return {PASS: True, NOT_JUDGED: None}.get(self.verdict, False)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
