"""The declared reader: a benchmark's log read by the rules its recipe declares (pure).

``benchmark.log`` (``envbuild.recipes.logspec.LogSpec``) says which lines hold the metric, the
step counter, where a run starts, and what says the run finished, diverged or failed. This
module applies those rules, line by line (each line cut at ``MAX_LINE`` characters, every
pattern run by RE2 in linear time), and gives what the built-in readers give: the metrics over
the window (``measure``), how the run ended (``completion``), the runs in the file
(``split_runs``), the GPU count the log prints (``gpus``), and which rule read which line
(``explain``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Iterator

from envbuild.recipes.logspec import MAX_LINE, LogRule, LogSpec, compile_linear
from envbuild.smoke.completion import Completion, _errors, _scheduler
from envbuild.smoke import logread


@lru_cache(maxsize=256)
def _rx(pattern: str) -> Any:
    return compile_linear(pattern)


def _lines(text: str) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(logread.lines(text), start=1):
        yield number, line[:MAX_LINE]


def _search(rule: LogRule, line: str) -> Any:
    return _rx(rule.regex).search(line)


def split_runs(spec: LogSpec, text: str) -> list[str]:
    """The runs in ``text``: a new one at each line the ``start`` rule matches (what precedes
    the first belongs to the first); one run without a start rule or marker."""
    if spec.start is None:
        return [text]
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if _search(spec.start, line[:MAX_LINE].rstrip("\n"))]
    if len(starts) < 2:
        return [text]
    bounds = [0] + starts[1:] + [len(lines)]
    return ["".join(lines[a:b]) for a, b in zip(bounds, bounds[1:])]


def last_run(spec: LogSpec, text: str) -> tuple[str, int]:
    runs = split_runs(spec, text)
    return runs[-1], len(runs)


def _number(match: Any, json_key: str | None) -> float | None:
    raw = match.group("value")
    if json_key is not None:
        try:
            raw = json.loads(raw).get(json_key)
        except (ValueError, AttributeError):
            return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    return value


@dataclass(frozen=True)
class Hit:
    """A line a rule read: its number in the run, the rule (``metrics.NAME``, ``progress``,
    ``start``, ``complete``, ``diverged``, ``errors``, ``gpus``), and what it read."""

    line: int
    rule: str
    read: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "rule": self.rule, "read": self.read, "text": self.text}


def explain(spec: LogSpec, text: str) -> list[Hit]:
    """Every line of the judged (last) run a rule read, in order."""
    run, _ = last_run(spec, text)
    rules: list[tuple[str, LogRule | Any]] = [(f"metrics.{k}", m) for k, m in spec.metrics.items()]
    rules += [(name, rule) for name, rule in (("progress", spec.progress), ("start", spec.start),
                                              ("gpus", spec.gpus)) if rule is not None]
    rules += [(f"{kind}[{i}]", rule) for kind in ("complete", "diverged", "errors")
              for i, rule in enumerate(getattr(spec, kind))]
    hits = []
    for number, line in _lines(run):
        for name, rule in rules:
            if m := _rx(rule.regex).search(line):
                read = {k: v for k, v in m.groupdict().items() if v is not None}
                hits.append(Hit(number, name, json.dumps(read) if read else "matched", line[:200]))
    return hits


def _series(spec: LogSpec, text: str) -> tuple[dict[str, list[float]], list[int], int | None]:
    """(each metric's values in order, the steps the progress lines print, the planned count)."""
    values: dict[str, list[float]] = {name: [] for name in spec.metrics}
    steps: list[int] = []
    planned = None
    for _, line in _lines(text):
        for name, metric in spec.metrics.items():
            if (m := _rx(metric.regex).search(line)) and (v := _number(m, metric.json_key)) is not None:
                values[name].append(v * metric.scale)
        if spec.progress is not None and (m := _search(spec.progress, line)):
            if (step := m.group("step")) and step.isdigit():
                steps.append(int(step))
            got = m.groupdict().get("planned")
            if got and got.isdigit():
                planned = int(got)
    return values, steps, planned


def measure(spec: LogSpec, text: str, warmup: int | None = None) -> dict[str, Any]:
    """The metrics of the last run: each the mean of its values after ``warmup`` (default 1),
    with ``values``, ``window`` and ``runs`` as the built-in readers give them."""
    run, runs = last_run(spec, text)
    values, steps, _ = _series(spec, run)
    warmup = 1 if warmup is None else warmup
    out: dict[str, Any] = {"runs": runs}
    kept_values: dict[str, list[float]] = {}
    for name, series in values.items():
        kept = [v for v in series[warmup:] if math.isfinite(v)]
        if kept:
            kept_values[name] = kept
            out[name] = sum(kept) / len(kept)
    if kept_values:
        first = next(iter(kept_values))
        used = steps[warmup:] if len(steps) == len(values[first]) else []
        out["values"] = kept_values
        out["window"] = {"unit": "iteration" if used else "row", "first": used[0] if used else warmup + 1,
                         "last": used[-1] if used else len(values[first]), "used": len(kept_values[first]),
                         "logged": len(values[first])}
    return out


def completion(spec: LogSpec, text: str, *, planned: int | None = None, rc: int | None = None,
               job_state: str | None = None) -> Completion:
    """How the last run ended, by the declared rules (then the errors every log is read for,
    and the scheduler's or launcher's word)."""
    run, runs = last_run(spec, text)
    values, steps, printed = _series(spec, run)
    sources = sorted({r.source for r in (spec.progress, *spec.complete, *spec.diverged, *spec.errors) if r})
    planned = printed or spec.planned or planned
    reached = steps[-1] if steps else None
    got = _state(spec, run, values, planned, reached, sources)
    if got.state != "diverged":
        if errors := _errors(run) + [r.what or r.regex for r in spec.errors if _found(r, run)]:
            got = replace(got, state="error", detail="the output shows " + ", ".join(errors))
        elif why := _scheduler(run, job_state, rc):
            got = replace(got, state="stopped", detail=why)
    got = replace(got, runs=runs)
    if runs > 1:
        got = replace(got, detail=f"{got.detail} (run {runs} of {runs} in the file; the earlier ones are not judged)")
    return got


def _found(rule: LogRule, text: str) -> int | None:
    return next((n for n, line in _lines(text) if _search(rule, line)), None)


def _state(spec: LogSpec, run: str, values: dict[str, list[float]], planned: int | None, reached: int | None,
           sources: list[str]) -> Completion:
    for rule in spec.diverged:
        if (n := _found(rule, run)) is not None:
            return Completion("diverged", f"line {n}: {rule.what or rule.regex}", planned, reached, sources)
    if any(not math.isfinite(v) for series in values.values() for v in series):
        return Completion("diverged", "a metric's logged value is not finite", planned, reached, sources)
    if spec.complete:
        if any(_found(rule, run) is not None for rule in spec.complete):
            return Completion("complete", "the end-of-run line was printed" +
                              (f" at step {reached}" if reached is not None else ""), planned, reached, sources)
        if reached is not None and planned is not None and reached < planned:
            return Completion("stopped", f"the last logged step is {reached} of {planned}", planned, reached, sources)
        return Completion("stopped", "the end-of-run line was not printed", planned, reached, sources)
    if reached is None:
        return Completion("stopped", "no step line was logged" if spec.progress else
                          "the recipe declares neither an end-of-run line nor a step counter", planned, None, sources)
    if planned is None:
        return Completion("stopped", f"step {reached} logged, but the planned count is not known (log.planned)",
                          None, reached, sources)
    if reached < planned:
        return Completion("stopped", f"the last logged step is {reached} of {planned}", planned, reached, sources)
    return Completion("complete", f"step {reached} of {planned} logged", planned, reached, sources)


def gpus(spec: LogSpec, text: str) -> tuple[int | None, str | None, str | None]:
    """(the GPU count, the GPU model, the line) the judged run's ``gpus`` rule reads."""
    if spec.gpus is None:
        return None, None, None
    run, _ = last_run(spec, text)
    for _, line in _lines(run):
        if (m := _search(spec.gpus, line)) and (count := m.group("gpus")) and count.isdigit() and int(count) > 0:
            return int(count), m.groupdict().get("model"), line.strip()[:200]
    return None, None, None
