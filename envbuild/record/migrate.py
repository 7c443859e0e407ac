"""Older run-folder shapes mapped to the current models, in one place.

Each function takes a file's JSON data as read and returns data in the current shape (the
input is not changed). What changed, and when:

- run.json ``envbuild.run/1`` (before the typed record): the same fields, merged as a dict;
  read as ``envbuild.run/2``. A run.json with no ``schema`` is taken for /1.
- smoke.json, native ``verdict`` without ``status`` (before the completion check, e.g.
  docs/results/h100-offline-run1.json, h200x2-run4): ``status`` derived as the judge decides
  it (``fail`` when ``passed`` is false; ``not-judged`` without a threshold, where ``passed``
  was then true and is now None; else ``pass``).
- preflight.json without ``recipe`` (a verdict before ``envbuild.compat.check.Verdict``, kept
  by tests/data and hand-made runs: ``{verdict|status, feasible?, violations|refusals|findings|
  problems|errors}``): mapped onto ``Verdict``, its items onto ``Violation`` (items at
  severity info/ok/pass dropped, as the report did).
"""

from __future__ import annotations

from typing import Any

from envbuild.errors import InputError
from envbuild.record.run import RUN_SCHEMA

RUN_SCHEMAS = ("envbuild.run/1", RUN_SCHEMA)
OK_WORDS = {"ok", "feasible", "pass", "passed", "warn", "warning"}


def run_info(data: dict[str, Any], source: str) -> dict[str, Any]:
    """run.json data in the ``envbuild.run/2`` shape."""
    schema = data.get("schema", "envbuild.run/1")
    if schema not in RUN_SCHEMAS:
        raise InputError(f"{source}: schema {schema!r} is not a run record envbuild reads "
                         f"({', '.join(RUN_SCHEMAS)})",
                         hint="a run made by a newer envbuild: read it with that version")
    return {**data, "schema": RUN_SCHEMA}


def smoke(data: dict[str, Any]) -> dict[str, Any]:
    """smoke.json data with its native verdict in the current shape."""
    native = data.get("native")
    verdict = native.get("verdict") if isinstance(native, dict) else None
    if not isinstance(verdict, dict) or "status" in verdict:
        return data
    if verdict.get("passed") is False:
        verdict = {**verdict, "status": "fail"}
    elif verdict.get("threshold") is None:
        verdict = {**verdict, "status": "not-judged", "passed": None}
    else:
        verdict = {**verdict, "status": "pass"}
    return {**data, "native": {**native, "verdict": verdict}}


PROBLEM_LISTS = ("violations", "refusals", "findings", "problems", "errors")


def preflight(data: dict[str, Any], host: str, run: Any) -> dict[str, Any]:
    """preflight.json data in ``envbuild.compat.check.Verdict``'s shape (``run``: the RunInfo)."""
    if "recipe" in data:
        return data
    word = str(data.get("verdict") or data.get("status") or "")
    feasible = data["feasible"] if isinstance(data.get("feasible"), bool) else word.lower() in OK_WORDS
    violations = []
    for key in PROBLEM_LISTS:
        for item in data.get(key) or []:
            violations += _violation(item)
    return {"feasible": feasible, "recipe": run.recipe, "target": run.target, "host": host, "origin": "",
            "torch_variant": None, "torch_reason": None, "violations": violations, "passed": []}


def _violation(item: Any) -> list[dict[str, Any]]:
    if not isinstance(item, dict):
        return [{"rule": "", "severity": "error", "message": str(item), "what": "", "why": "", "source": "",
                 "fix": ""}]
    severity = str(item.get("severity") or item.get("level") or "error").lower()
    if severity in ("info", "ok", "pass"):
        return []
    text = item.get("message") or item.get("what") or item.get("summary") or item.get("id") or ""
    return [{"rule": str(item.get("rule") or item.get("id") or ""),
             "severity": "warning" if severity == "warning" else "error", "message": str(text),
             "what": str(item.get("what") or ""), "why": str(item.get("why") or ""),
             "source": str(item.get("source") or ""), "fix": str(item.get("fix") or "")}]
