"""Smoke on provisioned nodes: the smoke.json a node's runs leave.

The runs themselves are planned in ``envbuild.plan.smoke`` (the plan's ``smoke`` step). On the
node every run leaves ``<prefix>/.envbuild/smoke/<name>.out`` (stdout), ``.err`` (stderr) and
``.rc`` (exit status); the role fetches them to ``nodes/<host>/smoke/``, and ``collect_node``
reads them back into a node's ``smoke.json`` (``{kind: result, native: {parser, metric,
metrics, verdict}}``, the layout envbuild.report reads), the native benchmark judged by
``envbuild.smoke.judge`` for the node's GPU.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envbuild.plan.smoke import FROM_SMOKE
from envbuild.recipes.schema import Benchmark
from envbuild.smoke import SMOKE_SCRIPTS, read_result
from envbuild.smoke.judge import Evidence, judge, measure, with_floor_verdicts
from envbuild.smoke.logread import LogTooLarge, read_log
from envbuild.smoke.native import reading


def _read(folder: Path, name: str) -> tuple[int, str, str] | None:
    """(exit status, stdout, stderr) of one run's fetched files, read as the judge reads a log
    (``envbuild.smoke.logread``: streamed, lines cut, the text held bounded); an output larger
    than the bound raises ``LogTooLarge``."""
    out, err, rc = (folder / f"{name}.{ext}" for ext in ("out", "err", "rc"))
    if not out.exists() and not rc.exists():
        return None
    try:
        code = int(rc.read_text().strip())
    except (OSError, ValueError):
        code = -1
    text = read_log(out, what=f"{name} output").text if out.exists() else ""
    return code, text, read_log(err, what=f"{name} output").text if err.exists() else ""


def section_head(benchmark: Benchmark) -> dict[str, Any]:
    """What a native section says of the benchmark before it is judged."""
    return {"parser": benchmark.parser, "metric": benchmark.metric, "unit": benchmark.unit}


def judged_section(recipe: str, benchmark: Benchmark, text: str, *, source: str, rc: int | None,
                   job_state: str | None = None, gpu: str | None = None, gpus: int | None = None,
                   record: str | None = None) -> dict[str, Any]:
    """A native section that ran: its metrics and the judge's verdict (``envbuild.smoke.judge``)."""
    with reading():
        verdict = judge(Evidence(recipe=recipe, benchmark=benchmark, text=text, rc=rc, job_state=job_state,
                                 gpu=gpu, gpus=gpus, record=record))
        metrics = measure(benchmark, text)
    return {**section_head(benchmark), "ran": True, "source": source, "rc": rc, "metrics": metrics,
            "verdict": verdict.to_dict()}


def native_section(recipe: str, benchmark: Benchmark | None, outputs: dict[str, tuple[int, str, str]],
                   skip: str | None = None, *, gpu: str | None = None, gpus: int | None = None) -> dict | None:
    """``{parser, metric, unit, ran, source, rc, metrics, verdict}`` for the recipe's benchmark,
    from the fetched outputs (``{name: (rc, stdout, stderr)}``), judged for the node's GPU model
    and count; ``ran: false`` with ``skip`` (``native_run``'s reason) when it did not run.

    The envbuild-smoke parser reads the gpt smoke's JSON (``tokens_per_s`` is reported under the
    recipe's name ``tokens_per_second`` by the parser's aliases).
    """
    if benchmark is None or not benchmark.parser:
        return None
    source = "gpt" if benchmark.parser == FROM_SMOKE else "native"
    got = outputs.get(source)
    if got is None:
        return {**section_head(benchmark), "ran": False, "reason": skip or f"no {source} output"}
    rc, out, err = got
    text = out + ("\n" + err if source == "native" else "")
    return judged_section(recipe, benchmark, text, source=source, rc=rc if source == "native" else None,
                          gpu=gpu, gpus=gpus, record=f"smoke/{source}.out")


def collect_node(folder: Path, names: list[str], recipe: str, benchmark: Benchmark | None,
                 skip: str | None = None, *, gpu: str | None = None, gpus: int | None = None) -> dict:
    """The node's smoke.json from ``folder`` (the fetched ``<name>.out/.err/.rc`` files of the
    runs ``names``); ``skip`` is why the native benchmark did not run, if it did not; ``gpu`` and
    ``gpus``: the node's GPU model and count (its facts), which the verdict is judged for."""
    outputs: dict[str, tuple[int, str, str]] = {}
    unread: dict[str, str] = {}  # a run whose output the judge does not hold whole: why
    for n in names:
        try:
            if (got := _read(folder, n)) is not None:
                outputs[n] = got
        except LogTooLarge as exc:
            unread[n] = exc.message
    results: dict[str, Any] = {name: {"ok": False, "error": f"not read: {why}"} for name, why in unread.items()
                               if name in SMOKE_SCRIPTS}
    for name, (rc, out, err) in outputs.items():
        if name in SMOKE_SCRIPTS:
            results[name] = with_floor_verdicts(read_result(name, rc, out, err))
    if benchmark is not None and benchmark.parser and (why := unread.get("gpt" if benchmark.parser == FROM_SMOKE
                                                                          else "native")):
        native: dict | None = {**section_head(benchmark), "ran": True, "error": f"the output was not judged: {why}"}
    else:
        # the benchmark ran with the GPUs the collective smoke saw (CUDA_VISIBLE_DEVICES), not every GPU
        # of the node: a log that prints no count of its own is judged for those
        gpus = visible_gpus(results.get("collective")) or gpus
        native = native_section(recipe, benchmark, outputs, skip, gpu=gpu, gpus=gpus)
    if native is not None and (results or native.get("ran")):
        results["native"] = native
    return results


def dumps(results: dict) -> str:
    """smoke.json text (stable key order)."""
    return json.dumps(results, indent=2, sort_keys=True) + "\n"


def visible_gpus(collective: dict | None) -> int | None:
    """The GPUs the node's processes could see (``gpus_visible`` of the collective smoke, which reads
    CUDA_VISIBLE_DEVICES), None when it did not say.

    >>> visible_gpus({"gpus_node": 2, "gpus_visible": 1, "cuda_visible_devices": "1"}), visible_gpus(None)
    (1, None)
    """
    seen = (collective or {}).get("gpus_visible")
    return seen if isinstance(seen, int) and seen > 0 else None
