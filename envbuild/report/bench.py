"""Benchmark rows from a node's smoke.json, showing the verdicts stored there (pure).

smoke.json holds one section per smoke script: ``gpt`` (tokens_per_s, tflops, mfu, loss),
``collective`` (bus bandwidth), ``apex`` (extension check), ``native`` (the recipe's own
benchmark). The native section holds ``metrics`` and ``verdict``: the judge's
(``envbuild.smoke.judge.Verdict``), which this module shows and never decides again. A gpt or
collective section carries the floors that apply to it (``thresholds: {metric: floor}``,
``envbuild.smoke.floors``) and what the judge said of each (``floors``).

A section measured several times (``envbuild smoke --repeat N``) carries
``repeat: {n, values: {metric: [v1, v2, ...]}}``; its rows then hold the median as the value and
a ``Spread`` (median, min, max). The native row's spread is the judge's measured window.

Older smoke.json files are mapped to today's form where every older run folder is
(``envbuild.record.migrate``: a native verdict of ``{passed, status, threshold, reason}``);
floors without the judge's word are judged by its rule (``stored_floors``).
"""

from __future__ import annotations

import math
from typing import Any

from envbuild.report.model import Benchmark, Comparison, Spread
from envbuild.recipes.schema import Benchmark as RecipeBenchmark
from envbuild.record import migrate
from envbuild.record.smoke import NativeSection, Section, SmokeRecord
from envbuild.record.migrate import UNRECORDED_GPU
from envbuild.smoke.judge import Verdict, floor_verdicts, published

GPT_METRICS = {"tokens_per_s": "tokens/s", "tflops": "TFLOP/s", "mfu": ""}


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def spread(values: Any) -> Spread | None:
    """Median, min and max of the finite numbers in ``values`` (None for fewer than two).

    >>> spread([3, 1, 2]).model_dump()
    {'n': 3, 'median': 2.0, 'min': 1.0, 'max': 3.0}
    """
    import statistics

    nums = [x for x in (_num(v) for v in values or []) if x is not None and math.isfinite(x)] \
        if isinstance(values, list) else []
    if len(nums) < 2:
        return None
    return Spread(n=len(nums), median=statistics.median(nums), min=min(nums), max=max(nums))


def _repeats(section: Section, key: str) -> Spread | None:
    return spread(section.repeat.values.get(key)) if section.repeat is not None else None


def as_record(smoke: SmokeRecord | dict) -> SmokeRecord:
    """smoke.json as its typed record (data read elsewhere goes through the record's own
    migration of older shapes, ``envbuild.record.migrate``)."""
    return smoke if isinstance(smoke, SmokeRecord) else SmokeRecord.model_validate(migrate.smoke(smoke))


def stored_verdict(native: NativeSection | dict, recipe_benchmark: RecipeBenchmark | None = None,
                   gpu: str | None = None) -> Verdict | None:
    """The judge's verdict stored in a native section (an older one was mapped onto it when the
    record was read: ``envbuild.record.migrate``), with the recipe's published figure beside
    it where it did not store one (``recipe_benchmark``, for the node's ``gpu``). None when
    there is nothing, or the benchmark did not run."""
    if isinstance(native, dict):
        native = as_record({"native": native}).native
    if native is None or native.ran is False or native.verdict is None:
        return None
    v = native.verdict
    if v.published is None and recipe_benchmark is not None:
        # an older verdict did not store the recipe's published figure: shown beside it
        v = v.model_copy(update={"published": published(recipe_benchmark, v.value, gpu, None)})
    return v


def stored_floors(section: Section) -> dict[str, bool | None]:
    """What the judge said of each floor of a gpt or collective section (``floors``); for an
    older section that lacks it, the judge's rule applied now (``envbuild.smoke.judge``)."""
    if section.floors is not None:
        return dict(section.floors)
    return floor_verdicts(section.as_written())


def compared_text(v: Verdict) -> str | None:
    """What the verdict's figure was compared with, in words."""
    c = v.compared
    if c is None:
        return None
    rel = ">=" if v.higher_is_better else "<="
    on = (f" on {c.gpus or '?'} x {c.gpu}" if c.gpu else
          f" ({UNRECORDED_GPU.split(': ', 1)[1]})" if c.source == UNRECORDED_GPU else " (any hardware)")
    if c.kind == "threshold":
        text = f"threshold {rel} {c.value:.6g}{on}"
    else:
        several = (f"the {c.statistic or 'median'} of {len(c.runs)} run(s), tolerance {c.tolerance:.1%}: "
                   if c.runs and c.tolerance is not None else "")
        sha = f", sha256 {c.sha256[:12]}" if c.sha256 and len(c.runs) <= 1 else ""
        text = f"reference {c.value:.6g}{on} ({several}{c.source}{sha}): {rel} {c.required:.6g} needed"
    return text + (f"; {c.normalisation}" if c.normalisation else "")


def comparison(v: Verdict) -> Comparison | None:
    """The verdict's yardstick as the report holds it (a reference's runs, statistic, spread and
    tolerance where the verdict stores them: older verdicts do not)."""
    c = v.compared
    if c is None:
        return None
    return Comparison(kind=c.kind, value=c.value, required=c.required, gpu=c.gpu, gpus=c.gpus, source=c.source,
                      normalisation=c.normalisation, runs=list(getattr(c, "runs", None) or []),
                      statistic=getattr(c, "statistic", None), spread=getattr(c, "spread", None),
                      tolerance=getattr(c, "tolerance", None))


def judged_fields(v: Verdict) -> dict[str, Any]:
    """What a benchmark row holds of the judge's verdict ``v`` besides its figure: the word, the
    yardstick, the run's GPU and the published figure's hardware and share."""
    c, pub = v.compared, v.published
    return {"verdict": v.verdict, "reason": v.reason, "compared_with": compared_text(v), "compared": comparison(v),
            "reference": c.source if c is not None and c.kind == "reference" else None,
            "reference_value": c.value if c is not None and c.kind == "reference" else None,
            "record": v.record, "gpu": v.gpu, "gpus": v.gpus,
            "published_source": pub.source if pub is not None else None,
            "published": pub.value if pub is not None and pub.compared else None,
            "published_not_compared": pub.why if pub is not None and not pub.compared else None,
            "published_gpu": pub.gpu if pub is not None else None,
            "published_gpus": pub.gpus if pub is not None else None,
            "published_percent": pub.percent if pub is not None else None}


def _row(name: str, value: Any, unit: str, threshold: Any, higher: bool, passed: bool | None,
         sp: Spread | None = None) -> Benchmark:
    v = _num(value)
    if sp is not None:
        v = sp.median  # a repeated number is shown (and was judged) by its median
    return Benchmark(name=name, value=v, unit=unit, threshold=_num(threshold), higher_is_better=higher,
                     passed=passed, spread=sp)


def native_row(native: NativeSection, recipe_benchmark: RecipeBenchmark | None = None,
               gpu: str | None = None) -> Benchmark | None:
    """The native benchmark's row: the stored verdict as it was decided."""
    v = stored_verdict(native, recipe_benchmark, gpu)
    if v is None:
        return None
    repeated = _repeats(native, v.metric)
    sp = repeated
    if sp is None and v.window is not None and v.window.n > 1:
        sp = Spread(n=v.window.n, median=v.window.median, min=v.window.min, max=v.window.max)
    c = v.compared
    return Benchmark(name=f"native.{v.metric}", value=sp.median if repeated else v.value,
                     unit=v.unit or native.unit, higher_is_better=v.higher_is_better,
                     threshold=c.required if c is not None and c.kind == "threshold" else None,
                     passed=v.passed, spread=sp, **judged_fields(v))


def benchmarks(smoke: SmokeRecord | dict, recipe_benchmark: RecipeBenchmark | None = None,
               gpu: str | None = None) -> list[Benchmark]:
    """Rows for every number worth a reviewer's look, in a stable order, with the verdicts
    smoke.json stores (``recipe_benchmark`` and the node's ``gpu``: only to show the published
    figure beside an older verdict that did not store it)."""
    smoke = as_record(smoke)
    rows: list[Benchmark] = []
    gpt = smoke.gpt
    if gpt is not None:
        judged = stored_floors(gpt)
        for key, unit in GPT_METRICS.items():
            value = getattr(gpt, key)
            if value is not None:
                rows.append(_row(f"gpt.{key}", value, unit, gpt.thresholds.get(key), True, judged.get(key),
                                 _repeats(gpt, key)))
        if gpt.loss is not None and "last" in gpt.loss.model_fields_set:  # a non-finite last loss has no value
            last = _num(gpt.loss.last)
            rows.append(_row("gpt.loss_last", last if last is not None and math.isfinite(last) else None,
                             "", gpt.thresholds.get("loss_last"), False, judged.get("loss_last")))
    coll = smoke.collective
    if coll is not None:
        judged = stored_floors(coll)
        key = "max_busbw_gbps"  # the bus bandwidth (nccl-tests' busbw) is what a floor judges
        if _num(coll.max_busbw_gbps) is not None:
            rows.append(_row(f"collective.{key}", coll.max_busbw_gbps, "GB/s", coll.thresholds.get(key), True,
                             judged.get(key), _repeats(coll, key)))
    native = smoke.native
    if native is not None and native.ran is not False:  # a benchmark that did not run has no row: not judged
        row = native_row(native, recipe_benchmark, gpu)
        if row is not None:
            rows.append(row)
    return rows


def section_ok(smoke: SmokeRecord | dict) -> dict[str, bool]:
    """{section: ok} for sections with an ``ok`` flag; a section holding ``error`` is not ok."""
    out = {}
    for name, section in sorted(as_record(smoke).sections().items()):
        if section.ok is not None or section.error is not None:
            out[name] = bool(section.ok) and section.error is None
    return out
