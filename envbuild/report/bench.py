"""Benchmark rows from a node's smoke.json, judged against thresholds (pure).

smoke.json holds one section per smoke script: ``gpt`` (tokens_per_s, tflops, mfu, loss),
``collective`` (bus bandwidth), ``apex`` (extension check), ``native`` (the recipe's own
benchmark, judged with the recipe's ``benchmark.threshold``). Each section may carry ``ok``;
``thresholds: {metric: value}`` in a section adds thresholds for its metrics. The native
section holds ``metrics`` (from ``envbuild.smoke.native.parse``) and/or ``verdict``
(``evaluate(...).to_dict()``).

A section measured several times (``envbuild smoke --repeat N``) carries
``repeat: {n, values: {metric: [v1, v2, ...]}}``; its rows then hold the median as the value and
a ``Spread`` (median, min, max). The native row carries the recipe's published figure
(``benchmark.published: {value, source, gpu}``) when the recipe has one and the node's GPU is
the model it was measured on; otherwise the row says why it is not compared.
"""

from __future__ import annotations

import math
import re
from typing import Any

from envbuild.report.model import Benchmark, Spread
from envbuild.smoke.hardware import comparison
from envbuild.smoke.native import evaluate

GPT_METRICS = {"tokens_per_s": "tokens/s", "tflops": "TFLOP/s", "mfu": ""}
BANDWIDTH = re.compile(r"busbw_gbps$")


def judge(value: float | None, threshold: float | None, higher_is_better: bool) -> bool | None:
    """True/False against the threshold (``envbuild.smoke.native.evaluate``); None without one.

    A missing value with a threshold fails, as ``evaluate`` does for a metric absent from a log.
    """
    if threshold is None:
        return None
    if value is None:
        return False  # a threshold was set and the number is missing: the benchmark did not deliver

    return evaluate({"m": value}, "m", threshold, higher_is_better).passed


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


def _repeats(section: dict, key: str) -> Spread | None:
    rep = section.get("repeat") if isinstance(section.get("repeat"), dict) else {}
    values = rep.get("values") if isinstance(rep.get("values"), dict) else {}
    return spread(values.get(key))


def _row(name: str, value: Any, unit: str, threshold: Any, higher: bool, sp: Spread | None = None) -> Benchmark:
    v, t = _num(value), _num(threshold)
    if sp is not None:
        v = sp.median  # a repeated number is judged by its median
    return Benchmark(name=name, value=v, unit=unit, threshold=t, higher_is_better=higher,
                     passed=judge(v, t, higher), spread=sp)


def published_for(recipe_benchmark: dict | None, gpu: str | None) -> tuple[float | None, str | None, str | None]:
    """(value, source, why not compared) of the recipe's published figure for a node whose GPU
    is ``gpu``: the value only when the figure was measured on the same GPU model."""
    value, source = published_figure(recipe_benchmark)
    if value is None:
        return None, None, None
    pub = (recipe_benchmark or {}).get("published") or {}
    same = comparison(pub.get("gpu"), gpu)
    return (value, source, None) if same.comparable else (None, source, same.why)


def published_figure(recipe_benchmark: dict | None) -> tuple[float | None, str | None]:
    """(value, source) of the recipe's ``benchmark.published``; (None, None) without one."""
    pub = (recipe_benchmark or {}).get("published")
    if not isinstance(pub, dict):
        return None, None
    source = pub.get("source")
    return _num(pub.get("value")), str(source) if source else None


def benchmarks(smoke: dict, recipe_benchmark: dict | None, gpu: str | None = None) -> list[Benchmark]:
    """Rows for every number worth a reviewer's look, in a stable order (``gpu``: the node's,
    for the comparison with the published figure)."""
    rows: list[Benchmark] = []
    gpt = smoke.get("gpt") or {}
    limits = gpt.get("thresholds") or {}
    for key, unit in GPT_METRICS.items():
        if key in gpt:
            rows.append(_row(f"gpt.{key}", gpt[key], unit, limits.get(key), True, _repeats(gpt, key)))
    loss = gpt.get("loss") if isinstance(gpt.get("loss"), dict) else {}
    if "last" in loss:  # the training loss after the last step; a non-finite one has no value
        last = _num(loss["last"])
        rows.append(_row("gpt.loss_last", last if last is not None and math.isfinite(last) else None,
                         "", limits.get("loss_last"), False))
    coll = smoke.get("collective") or {}
    limits = coll.get("thresholds") or {}
    for key in sorted(k for k in coll if BANDWIDTH.search(k) and _num(coll[k]) is not None):
        rows.append(_row(f"collective.{key}", coll[key], "GB/s", limits.get(key), True, _repeats(coll, key)))
    native = smoke.get("native") or {}
    if native and native.get("ran") is not False:  # a benchmark that did not run has no row: not judged
        rb = recipe_benchmark or {}
        verdict = native.get("verdict") if isinstance(native.get("verdict"), dict) else {}
        metric = rb.get("metric") or verdict.get("metric") or native.get("metric")
        metrics = native.get("metrics") or {}
        value = metrics.get(metric, native.get(metric, verdict.get("value", native.get("value"))))
        threshold = rb.get("threshold", verdict.get("threshold", native.get("threshold")))
        higher = rb.get("higher_is_better", native.get("higher_is_better", True))
        if metric:
            row = _row(f"native.{metric}", value, rb.get("unit") or native.get("unit", ""),
                       threshold, bool(higher), _repeats(native, metric))
            row.published, row.published_source, row.published_not_compared = published_for(rb, gpu)
            rows.append(row)
    return rows


def section_ok(smoke: dict) -> dict[str, bool]:
    """{section: ok} for sections with an ``ok`` flag; a section holding ``error`` is not ok."""
    out = {}
    for k, v in sorted(smoke.items()):
        if isinstance(v, dict) and ("ok" in v or "error" in v):
            out[k] = bool(v.get("ok", False)) and "error" not in v
    return out
