"""The parse flow: a native benchmark's output judged for a recipe and a GPU.

``parse(ParseRequest(...)) -> ParseOutcome``: the recipe loaded as ``envbuild show`` loads it
(a shipped name or a YAML path, ``envbuild.flows.recipes.load_recipe_arg``), then the file read
and judged by ``envbuild.smoke.parselog.parse_log``, whose ``ParseOutcome`` (the verdict, the
threshold, the numbers found, the exit code) is the outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envbuild.smoke.parselog import ParseOutcome

@dataclass(frozen=True)
class ParseRequest:
    """``log`` to judge for ``recipe`` (a name or a YAML path): ``gpu`` the GPU model it ran on,
    ``gpus`` how many it used (both override what the log prints), ``warmup`` the logged values
    left out at the start (None: the recipe's window), ``explain`` which rule read which line."""

    recipe: str
    log: Path
    gpu: str | None = None
    gpus: int | None = None
    warmup: int | None = None
    explain: bool = False


def parse(request: ParseRequest) -> ParseOutcome:
    """Judge (see the module docstring). InputError for a bad recipe, one without a benchmark, or
    an unreadable file."""
    from envbuild.flows.recipes import load_recipe_arg
    from envbuild.smoke import parselog

    rec = load_recipe_arg(request.recipe)
    return parselog.parse_log(parselog.ParseRequest(recipe=rec, log=request.log, gpu=request.gpu, gpus=request.gpus,
                                                    warmup=request.warmup, explain=request.explain))
