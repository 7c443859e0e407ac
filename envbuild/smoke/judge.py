"""The one judge: a benchmark run's verdict, from its output and the hardware it ran on (pure).

``judge(Evidence(...)) -> Verdict`` is the only place a verdict is decided; provision's smoke
(``envbuild.smoke.onnode``), ``envbuild launch --submit``, ``envbuild parse`` and the report all
carry the ``Verdict`` it returns, and the report only shows it. Its word is one of ``VERDICTS``:

* ``NOTHING FOUND``: the recipe's metric is not in the output (the verdict fails);
* ``FAIL``: the run did not complete (``envbuild.smoke.completion``: stopped early, diverged,
  errored, cancelled), whatever its throughput; or its figure misses what it is compared with;
* ``PASS``: the run completed and its figure meets what it is compared with;
* ``NOT JUDGED``: the run completed, and nothing applies to this GPU to compare it with.

What a figure is compared with, in this order:

1. the recipe's threshold, on the GPU model it was measured on (``threshold_gpu``; none: any
   hardware). When the GPU counts differ and the metric is a whole job's (not ``per_gpu``), the
   figures are compared per GPU, and the normalisation is stated;
2. the same-GPU reference (``envbuild.smoke.references``): a run recorded on this GPU model;
   the figure PASSes at >= 95 % of it (per GPU when counts differ), and the verdict names both
   records.

Otherwise NOT JUDGED says why: the threshold's GPU, and the GPU models that have a reference.
The window (``benchmark.window``: the logged values after the warm-up) is given with its spread.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from pydantic import BaseModel, ConfigDict

from envbuild.recipes.schema import Benchmark
from envbuild.record.verdict import (VERDICTS, FAIL, NOT_JUDGED, NOTHING_FOUND, PASS,  # noqa: F401 - the words, re-exported
                                     Compared, Published, Spread, Verdict)
from envbuild.smoke import references as refs
from envbuild.smoke import readers, repeat
from envbuild.smoke.hardware import comparison, short_name
from envbuild.smoke.logfacts import taken
from envbuild.smoke.native import ALIASES, reading, strip_task_labels


class Evidence(BaseModel):
    """What a verdict is decided from: the recipe's benchmark and its output, how the run ended
    (``rc``: the launcher's exit status; ``job_state``: the scheduler's final state) and the GPU
    it ran on (``gpu``: as nvidia-smi names it; ``gpus``: the count where the output does not
    print it; ``override``: they were given by hand, ``envbuild parse --gpu/--gpus``, and win over
    what the output prints, the verdict saying where they differ: ``envbuild.smoke.logfacts``).
    ``record`` names the output (a path) in the verdict; ``warmup`` overrides the window's;
    ``planned``: the iterations the command asks for where the output does not say."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    recipe: str
    benchmark: Benchmark
    text: str
    rc: int | None = None
    job_state: str | None = None
    gpu: str | None = None
    gpus: int | None = None
    override: bool = False
    record: str | None = None
    warmup: int | None = None
    planned: int | None = None
    sha256: str | None = None


def _finite(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def judge(ev: Evidence) -> Verdict:
    """The verdict on one benchmark run (module docstring), judged for the GPU model and count
    the judged run's output prints (``envbuild.smoke.logfacts``) unless ``ev`` overrides them;
    the reason says where they differ, and how many runs the file holds when it holds several."""
    with reading():
        rd = readers.reader(ev.benchmark)
        run, runs = rd.last_run(ev.text)
        took = taken(rd.printed(run), ev.gpu, ev.gpus, override=ev.override)
        got = _judged(ev.model_copy(update={"gpu": took.gpu, "gpus": took.gpus}))
    notes = [took.note] if took.note else []
    if runs > 1 and f"run {runs} of {runs}" not in got.reason:
        notes.append(f"the file holds {runs} runs: run {runs} of {runs} is judged, its figure shown")
    return got.model_copy(update={"reason": "; ".join([got.reason, *notes])}) if notes else got


def window_of(metrics: dict[str, Any], key: str, value: float, bench: Benchmark, warmup: int) -> Spread:
    """The spread of the window's per-iteration values of ``key`` where the parser gives them
    (``values: {key: [...]}``, ``envbuild.smoke.native``), else of the one value it gives."""
    series = metrics.get("values") if isinstance(metrics.get("values"), dict) else {}
    raw = series.get(key)
    values = [v for v in (_finite(x) for x in raw or []) if v is not None] if isinstance(raw, list) else []
    values = values or [value]
    what = bench.window.what if bench.window else ""
    return Spread(n=len(values), median=statistics.median(values), min=min(values), max=max(values),
                  warmup=warmup, what=" ".join(what.split()))


def _key(metrics: dict[str, Any], metric: str) -> str:
    """The parser's own key behind a recipe-facing metric name (``native.ALIASES``)."""
    return ALIASES.get(metric, metric) if ALIASES.get(metric) in metrics else metric


def _per_gpu(bench: Benchmark, run_gpus: int | None, their_gpus: int | None, figure: float,
             what: str) -> tuple[float | None, str | None, str | None]:
    """(``figure`` for this run's GPU count, the normalisation stated, why none can be made)."""
    if their_gpus is None or run_gpus == their_gpus:
        return figure, None, None
    if bench.same_gpu_count:
        here = f"{run_gpus} GPU(s) here" if run_gpus else "this run's GPU count is not known"
        return None, None, (f"the {what} was measured on {their_gpus} GPU(s), {here}: this benchmark runs "
                            "another workload on another number of GPUs, so only a figure measured on as "
                            "many GPUs compares")
    if bench.per_gpu:
        return figure, (f"the metric is per GPU: {run_gpus or '?'} GPU(s) here, {their_gpus} in the {what}, "
                        "nothing divided out"), None
    if run_gpus is None:
        return None, None, (f"the {what} was measured on {their_gpus} GPU(s) and this run's GPU count is not "
                            "known (give it: envbuild parse --gpus N)")
    scaled = figure / their_gpus * run_gpus
    return scaled, (f"per GPU: the {what}'s {figure:.6g} on {their_gpus} GPU(s) is {figure / their_gpus:.6g} "
                    f"per GPU, {scaled:.6g} for this run's {run_gpus}"), None


def _meets(value: float, bound: float, higher: bool) -> bool:
    return value >= bound if higher else value <= bound


def published(bench: Benchmark, value: float | None, gpu: str | None, gpus: int | None) -> Published | None:
    """The recipe's published figure beside ``value`` measured on ``gpus`` x ``gpu``."""
    pub = bench.published
    if pub is None:
        return None
    same = comparison(pub.gpu, gpu)
    out = {"value": pub.value, "source": " ".join(pub.source.split()), "gpu": pub.gpu, "gpus": pub.gpus,
           "compared": same.comparable, "why": same.why}
    if not same.comparable or value is None or not pub.value:
        return Published(**out)
    scaled, norm, why_not = _per_gpu(bench, gpus, pub.gpus, pub.value, "published figure")
    if scaled is None:
        return Published(**{**out, "compared": False, "why": str(why_not)})
    pct = value / scaled * 100.0
    return Published(**out, percent=pct if math.isfinite(pct) else None, normalisation=norm)


def _judged(ev: Evidence) -> Verdict:
    """The verdict on one benchmark run, for ``ev.gpu`` x ``ev.gpus`` as ``judge`` took them."""
    bench = ev.benchmark
    text = strip_task_labels(ev.text)
    rd = readers.reader(bench)
    warmup = ev.warmup if ev.warmup is not None else bench.window.warmup if bench.window else None
    metrics = measure(bench, text, warmup)
    done = rd.completion(text, planned=ev.planned, rc=ev.rc, job_state=ev.job_state)
    gpus = ev.gpus  # judge(): the count the judged run prints, unless --gpus overrides it
    base: dict[str, Any] = {"metric": bench.metric, "unit": bench.unit, "higher_is_better": bench.higher_is_better,
                            "completion": done.to_dict(), "gpu": ev.gpu, "gpus": gpus, "record": ev.record}
    value = _finite(metrics.get(bench.metric))
    base["published"] = published(bench, value, ev.gpu, gpus)
    unfinished = "" if done.complete else f"the run did not complete ({done.state}: {done.detail})"
    if value is None:
        found = ", ".join(sorted(k for k, v in metrics.items() if _finite(v) is not None)) or "none"
        why = f"metric {bench.metric!r} not found in the output (metrics found: {found})"
        return Verdict(verdict=NOTHING_FOUND, reason=why + (f"; {unfinished}" if unfinished else ""), **base)
    base["value"] = value
    base["window"] = window_of(metrics, _key(metrics, bench.metric), value, bench,
                               warmup if warmup is not None else rd.default_warmup())
    if unfinished:
        return Verdict(verdict=FAIL, reason=unfinished, **base)
    shown = f"{bench.metric} = {value:.6g}{' ' + bench.unit if bench.unit else ''}"
    rel = ">=" if bench.higher_is_better else "<="
    notes: list[str] = []

    if bench.threshold is not None:
        cmp = comparison(bench.threshold_gpu, ev.gpu, "threshold measured") if bench.threshold_gpu else None
        if cmp is None or cmp.comparable:
            bound, norm, why_not = _per_gpu(bench, gpus, bench.threshold_gpus, bench.threshold, "threshold")
            if bound is None:
                notes.append(str(why_not))
            else:
                ok = _meets(value, bound, bench.higher_is_better)
                on = f" (measured on {bench.threshold_gpus or ''}{' x ' if bench.threshold_gpus else ''}" \
                     f"{bench.threshold_gpu})" if bench.threshold_gpu else " (any hardware)"
                compared = Compared(kind="threshold", value=bench.threshold, required=bound, gpu=bench.threshold_gpu,
                                    gpus=bench.threshold_gpus, source=bench.source.url if bench.source else None,
                                    normalisation=norm)
                reason = (f"{shown} {'meets' if ok else 'misses'} the threshold {rel} {bound:.6g}{on}"
                          + (f"; {norm}" if norm else ""))
                return Verdict(verdict=PASS if ok else FAIL, compared=compared, reason=reason, **base)
        else:
            notes.append(f"the threshold {rel} {bench.threshold:.6g} applies only on its GPU: {cmp.why}")
    else:
        notes.append("the recipe sets no threshold")

    return _against_reference(ev, bench, value, gpus, shown, rel, notes, base)


def _against_reference(ev: Evidence, bench: Benchmark, value: float, gpus: int | None, shown: str, rel: str,
                       notes: list[str], base: dict[str, Any]) -> Verdict:
    """The verdict against the same-GPU reference of several runs (``envbuild.smoke.repeat``),
    the judged record left out of it; NOT JUDGED where none applies, saying why."""
    ref = refs.for_gpu(ev.recipe, ev.gpu, gpus)
    ref = ref if ref is not None and ref.metric == bench.metric else None
    if ref is not None and len(ref.runs) < repeat.MIN_RUNS:
        notes.append(f"{len(ref.runs)} run(s) are recorded on {ref.gpus} x {ref.gpu} "
                     f"({', '.join(f'docs/results/{r}' for r in ref.records)}): a reference judges only once it holds "
                     f"{repeat.MIN_RUNS}, so that its spread is measured (record more runs there)")
        return Verdict(verdict=NOT_JUDGED, reason=f"{shown}, not judged: " + "; ".join(notes), **base)
    itself = ""
    if ref is not None and ref.holds(ev.sha256):
        itself = (f"this record is itself one of the reference's runs on {ref.gpus} x {ref.gpu}, "
                  "never its own yardstick: judged against the others")
        notes.append(itself)
        ref = ref.without(ev.sha256)
    if ref is not None and ref.runs:
        rule = repeat.bound(ref, bench.higher_is_better)
        if rule.required is None:
            notes.append(rule.why)
        else:
            ok = _meets(value, rule.required, bench.higher_is_better)
            records = ", ".join(f"docs/results/{r}" for r in ref.records)
            compared = Compared(kind="reference", value=rule.center, required=rule.required, gpu=ref.gpu,
                                gpus=ref.gpus, source=records, sha256=ref.runs[0].sha256,
                                share=1 - rule.tolerance, runs=ref.records, statistic=rule.statistic,
                                spread=rule.spread, tolerance=rule.tolerance, floor=repeat.FLOOR)
            this = f" ({ev.record})" if ev.record else ""
            share = (f"{value / rule.center:.1%} of" if bench.higher_is_better
                     else f"{rule.center / value:.1%} of the speed of")
            reason = (f"{shown}{this} {'meets' if ok else 'misses'} {rel} {rule.required:.6g} ({share} the "
                      f"reference): {rule.describe()}: {records}" + (f"; {itself}" if itself else ""))
            return Verdict(verdict=PASS if ok else FAIL, compared=compared, reason=reason, **base)
    elif ref is None:
        notes.append(_no_reference(ev, bench, gpus))
    else:
        notes.append(f"the reference on {ref.gpus} x {ref.gpu} has no other run")
    return Verdict(verdict=NOT_JUDGED, reason=f"{shown}, not judged: " + "; ".join(notes), **base)


def _no_reference(ev: Evidence, bench: Benchmark, gpus: int | None) -> str:
    """Why no reference applies: none on this model, or only on other GPU counts of it."""
    counts = sorted({r.gpus for r in refs.on_model(ev.recipe, ev.gpu) if r.metric == bench.metric})
    if ev.gpu and counts:
        here = f"{gpus} GPU(s)" if gpus else "an unknown number of GPUs (give --gpus N)"
        return (f"the references on {short_name(ev.gpu)} were recorded on {', '.join(map(str, counts))} GPU(s) "
                f"and this run used {here}: only a reference on as many GPUs compares")
    have = sorted({short_name(r.gpu) for r in refs.for_recipe(ev.recipe) if r.metric == bench.metric})
    here = f"this run's GPU ({ev.gpu})" if ev.gpu else "this run's GPU (not known: give --gpu MODEL)"
    return (f"no reference recorded on {here}; references exist for: {', '.join(have)}" if have
            else "no run of this recipe is recorded as a reference")


def measure(bench: Benchmark, text: str, warmup: int | None = None) -> dict[str, Any]:
    """The metrics the benchmark's parser reads from ``text`` over its window (``warmup``: the
    logged values left out at the start; None: the window's, else the parser's own)."""
    if warmup is None and bench.window is not None:
        warmup = bench.window.warmup
    with reading():
        return readers.reader(bench).measure(text, warmup)


def floor_verdicts(section: dict) -> dict[str, bool | None]:
    """Each floor of a gpt or collective smoke section (``thresholds: {metric: floor}``,
    ``envbuild.smoke.floors``: same-hardware ratios, so they hold on any GPU) judged against the
    section's number, the median over its repeats where it was repeated: True met, False missed
    (or the number is absent), None for a metric without a floor."""
    limits = section.get("thresholds") if isinstance(section.get("thresholds"), dict) else {}
    rep = section.get("repeat") if isinstance(section.get("repeat"), dict) else {}
    repeats = rep.get("values") if isinstance(rep.get("values"), dict) else {}
    out: dict[str, bool | None] = {}
    for key, floor in limits.items():
        bound = _finite(floor)
        if bound is None:
            out[key] = None
            continue
        if key == "loss_last":  # the training loss after the last step: lower is better
            loss = section.get("loss") if isinstance(section.get("loss"), dict) else {}
            value, higher = _finite(loss.get("last")), False
        else:
            values = [v for v in (_finite(x) for x in repeats.get(key) or []) if v is not None]
            value = statistics.median(values) if len(values) > 1 else _finite(section.get(key))
            higher = True
        out[key] = value is not None and _meets(value, bound, higher)
    return out


def with_floor_verdicts(section: dict) -> dict:
    """``section`` with what the judge says of each of its floors (``floors``), when it has any."""
    if isinstance(section, dict) and section.get("thresholds"):
        return {**section, "floors": floor_verdicts(section)}
    return section


def judge_text(recipe: str, benchmark: Benchmark, text: str, **kw: Any) -> Verdict:
    """``judge`` of ``text`` (keyword arguments: ``Evidence``'s other fields)."""
    return judge(Evidence(recipe=recipe, benchmark=benchmark, text=text, **kw))
