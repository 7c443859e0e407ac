"""Smoke on provisioned nodes: the smoke.json a node's runs leave.

The runs themselves are planned in ``envbuild.plan.smoke`` (the plan's ``smoke`` step). On the
node every run leaves ``<prefix>/.envbuild/smoke/<name>.out`` (stdout), ``.err`` (stderr) and
``.rc`` (exit status); the role fetches them to ``nodes/<host>/smoke/``, and ``collect_node``
reads them back into a node's ``smoke.json`` (``{kind: result, native: {parser, metric,
metrics, verdict}}``, the layout envbuild.report reads).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envbuild.plan.smoke import FROM_SMOKE
from envbuild.smoke import SMOKE_SCRIPTS, read_result
from envbuild.smoke.completion import judge
from envbuild.smoke.native import parse


def _read(folder: Path, name: str) -> tuple[int, str, str] | None:
    out, err, rc = (folder / f"{name}.{ext}" for ext in ("out", "err", "rc"))
    if not out.exists() and not rc.exists():
        return None
    try:
        code = int(rc.read_text().strip())
    except (OSError, ValueError):
        code = -1
    text = out.read_text(errors="replace") if out.exists() else ""
    return code, text, err.read_text(errors="replace") if err.exists() else ""


def native_section(benchmark: dict | None, outputs: dict[str, tuple[int, str, str]],
                   skip: str | None = None) -> dict | None:
    """``{parser, metric, unit, metrics, verdict}`` for the recipe's benchmark, from the fetched
    outputs (``{name: (rc, stdout, stderr)}``); ``ran: false`` with ``skip`` (``native_run``'s
    reason) when it did not run.

    The envbuild-smoke parser reads the gpt smoke's JSON (``tokens_per_s`` is reported under the
    recipe's name ``tokens_per_second`` by the parser's aliases).
    """
    if not benchmark or not benchmark.get("parser"):
        return None
    parser, metric = benchmark["parser"], benchmark.get("metric")
    section: dict[str, Any] = {"parser": parser, "metric": metric, "unit": benchmark.get("unit", ""),
                               "threshold": benchmark.get("threshold"),
                               "higher_is_better": benchmark.get("higher_is_better", True)}
    source = "gpt" if parser == FROM_SMOKE else "native"
    got = outputs.get(source)
    if got is None:
        return {**section, "ran": False, "reason": skip or f"no {source} output"}
    rc, out, err = got
    text = out + ("\n" + err if source == "native" else "")
    metrics = parse(parser, text)
    verdict = judge(parser, text, metrics, metric, section["threshold"], bool(section["higher_is_better"]),
                    rc=rc if source == "native" else None)
    return {**section, "ran": True, "source": source, "rc": rc, "metrics": metrics,
            "verdict": verdict.to_dict()}


def collect_node(folder: Path, names: list[str], benchmark: dict | None, skip: str | None = None) -> dict:
    """The node's smoke.json from ``folder`` (the fetched ``<name>.out/.err/.rc`` files of the
    runs ``names``); ``skip`` is why the native benchmark did not run, if it did not."""
    outputs = {n: got for n in names if (got := _read(folder, n)) is not None}
    results: dict[str, Any] = {}
    for name, (rc, out, err) in outputs.items():
        if name in SMOKE_SCRIPTS:
            results[name] = read_result(name, rc, out, err)
    native = native_section(benchmark, outputs, skip)
    if native is not None and (results or native.get("ran")):
        results["native"] = native
    return results


def dumps(results: dict) -> str:
    """smoke.json text (stable key order)."""
    return json.dumps(results, indent=2, sort_keys=True) + "\n"
