"""How a benchmark's log is read, declared in the recipe itself (``benchmark.log``).

A recipe names its log reader in ``benchmark.parser``: one of envbuild's built-in readers
(``BUILTIN``), one a Python package registers under the entry-point group ``envbuild.parsers``
(``plugin_names``), or ``declared``: the rules below, in the recipe, with no code at all.

Every rule is a regular expression run by RE2 (linear time in the line's length: no
backreferences, no lookaround; a pattern RE2 refuses is refused when the recipe is loaded) on
each line of the log, cut at ``MAX_LINE`` characters, and cites the code that prints the line.

Example (GPT-NeoX v1.0, megatron/training.py ``training_log``)::

    benchmark:
      command: python ./deepy.py train.py configs/125M.yml configs/local_setup.yml
      parser: declared
      metric: samples_per_second
      unit: samples/s
      log:
        metrics:
          samples_per_second:
            regex: 'samples/sec: (?P<value>[0-9.]+)'
            source: EleutherAI/gpt-neox v1.0 megatron/training.py:training_log
        progress:
          regex: 'iteration\\s+(?P<step>\\d+)\\s*/\\s*(?P<planned>\\d+)'
          source: EleutherAI/gpt-neox v1.0 megatron/training.py:training_log
        start: {regex: 'NeoXArgs\\.from_ymls\\(\\)', source: megatron/neox_arguments/arguments.py}
        diverged:
          - {regex: 'lm_loss: (?:nan|inf)', source: megatron/training.py:training_log}
        gpus: {regex: 'world_size \\.+ (?P<gpus>\\d+)', source: megatron/neox_arguments/arguments.py:print}

``metrics``: each metric the recipe may name (``benchmark.metric``), a pattern whose group
``value`` is the number (or, with ``json_key``, a JSON object whose key holds it), times
``scale``. The metric's figure is the mean of its values after the window's warm-up.
``progress``: the step counter line (group ``step``; ``planned`` where the line prints the
planned count). ``start``: where one run begins (a file with several is split there; the last
is judged). ``complete``: lines that say the run finished. ``diverged`` and ``errors``: lines
that say it diverged or failed (a Python traceback, CUDA out of memory, NCCL and Slurm errors
are always errors). ``gpus``: the line that prints the GPU count (group ``gpus``; ``model``
where it prints the GPU model). ``planned``: the steps the command runs, where no line says.
"""

from __future__ import annotations

import difflib
from functools import cache
from importlib.metadata import entry_points
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from envbuild.recipes.linear import MAX_LINE, MAX_PATTERN, compile_linear  # noqa: F401 - the readers' one cap

# the readers shipped in envbuild.smoke.native (a test keeps the two lists equal)
BUILTIN = ("alpa-benchmark", "envbuild-smoke", "megatron-deepspeed", "megatron-pretrain", "megatronapp",
           "opt-baselines")
DECLARED = "declared"
ENTRY_POINTS = "envbuild.parsers"


def _linear(pattern: str) -> str:
    compile_linear(pattern)
    return pattern


LinearRegex = Annotated[str, AfterValidator(_linear)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _needs_group(pattern: str, *groups: str) -> None:
    missing = [g for g in groups if g not in compile_linear(pattern).groupindex]
    if missing:
        raise ValueError(f"{pattern!r} has no named group {', '.join(f'(?P<{g}>...)' for g in missing)}")


class LogRule(_Strict):
    """One kind of line: the pattern, and the code that prints it (repository, commit, file:line)."""

    regex: LinearRegex
    source: str = Field(min_length=1)
    what: str = ""  # in words, for a verdict's detail (default: the pattern)


class LogMetric(_Strict):
    """A metric's line: ``regex`` with a group ``value`` (a number, or a JSON object read at
    ``json_key``), multiplied by ``scale``."""

    regex: LinearRegex
    source: str = Field(min_length=1)
    json_key: str | None = None
    scale: float = 1.0

    @model_validator(mode="after")
    def _value_group(self) -> "LogMetric":
        _needs_group(self.regex, "value")
        return self


class LogSpec(_Strict):
    """The declared reader of a benchmark's log (module docstring)."""

    metrics: dict[str, LogMetric] = Field(min_length=1)
    progress: LogRule | None = None
    start: LogRule | None = None
    complete: list[LogRule] = Field(default_factory=list)
    diverged: list[LogRule] = Field(default_factory=list)
    errors: list[LogRule] = Field(default_factory=list)
    gpus: LogRule | None = None
    planned: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _groups(self) -> "LogSpec":
        if self.progress is not None:
            _needs_group(self.progress.regex, "step")
        if self.gpus is not None:
            _needs_group(self.gpus.regex, "gpus")
        return self


@cache
def plugin_names() -> tuple[str, ...]:
    """The readers installed packages register (entry-point group ``envbuild.parsers``)."""
    return tuple(sorted({ep.name for ep in entry_points(group=ENTRY_POINTS)}))


def known() -> list[str]:
    return sorted({*BUILTIN, DECLARED, *plugin_names()})


def unknown(name: str) -> str | None:
    """Why ``name`` names no reader (None: it does), with the closest names."""
    if name in known():
        return None
    close = difflib.get_close_matches(name, known(), n=2)
    mean = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return (f"unknown parser {name!r}: {mean}known: {', '.join(known())} (declare one in the recipe with "
            f"parser: {DECLARED} and a log: section, or install a package registering one under {ENTRY_POINTS})")
