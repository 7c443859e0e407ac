"""The judge of ``envbuild parse``: a benchmark's output file judged for a recipe and a GPU.

``parse_log(ParseRequest(recipe, log, gpu=..., gpus=..., warmup=...)) -> ParseOutcome``: reads
the file (``envbuild.smoke.logread``: streamed, lines cut, the text held bounded), judges it
(``envbuild.smoke.judge``) and returns the verdict with the metrics the parser found. The flow
``envbuild.flows.parse`` loads the recipe and calls this; the CLI prints the outcome.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from envbuild.errors import NOT_JUDGED, InputError
from envbuild.recipes.schema import Recipe
from envbuild.smoke import readers
from envbuild.smoke.judge import FAIL, NOTHING_FOUND, PASS, Evidence, Verdict, judge, measure
from envbuild.smoke.logread import read_log
from envbuild.smoke.native import reading

# envbuild parse's exit status for each verdict (errors.py: 5 NOT JUDGED)
EXIT = {PASS: 0, FAIL: 1, NOTHING_FOUND: 2, "NOT JUDGED": NOT_JUDGED}


class ParseRequest(BaseModel):
    """A benchmark output file to judge for ``recipe``: ``gpu`` the GPU model it ran on (as
    nvidia-smi names it), ``gpus`` how many it used (given by hand, both override what the output
    prints, the verdict saying where they differ), ``warmup`` the logged values left out at the
    start (None: the recipe's window)."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    recipe: Recipe
    log: Path
    gpu: str | None = None
    gpus: int | None = None
    warmup: int | None = None
    explain: bool = False  # say which rule read which line of the judged run


class ParseOutcome(BaseModel):
    """The verdict on the file, with the recipe's parser, threshold and the numbers it found."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    recipe: str
    parser: str
    logfile: str
    threshold: float | None
    threshold_gpu: str | None
    threshold_gpus: int | None
    threshold_source: str | None
    verdict: Verdict
    metrics: dict[str, float]
    explained: list[dict[str, Any]] | None = None  # --explain: {line, rule, read, text} of the judged run

    @property
    def exit_code(self) -> int:
        return EXIT[self.verdict.verdict]

    def to_dict(self) -> dict[str, Any]:
        """The --json form: the verdict's fields at the top level, beside the request's."""
        data = self.model_dump(mode="json")
        return {**{k: v for k, v in data.items() if k != "verdict"}, **data["verdict"]}


def parse_log(req: ParseRequest) -> ParseOutcome:
    bench = req.recipe.benchmark
    if bench is None:
        raise InputError(f"recipe {req.recipe.name} has no benchmark to parse",
                         hint="envbuild show RECIPE lists its benchmark")
    log = read_log(req.log)  # streamed: lines cut, the text held bounded (envbuild.smoke.logread)
    with reading():
        verdict = judge(Evidence(recipe=req.recipe.name, benchmark=bench, text=log.text, gpu=req.gpu, gpus=req.gpus,
                                 override=True, warmup=req.warmup, record=str(req.log), sha256=log.sha256))
        metrics = measure(bench, log.text, req.warmup)
        explained = readers.reader(bench).explain(log.text) if req.explain else None
    numbers = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return ParseOutcome(recipe=req.recipe.name, parser=bench.parser, logfile=str(req.log),
                        threshold=bench.threshold, threshold_gpu=bench.threshold_gpu,
                        threshold_gpus=bench.threshold_gpus,
                        threshold_source=bench.source.url if bench.source else None,
                        verdict=verdict, metrics=numbers, explained=explained)
