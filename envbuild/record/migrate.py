"""Older run-folder shapes mapped to the current models, in one place.

Each function takes a file's JSON data as read and returns data in the current shape (the
input is not changed). What changed, and when:

- run.json ``envbuild.run/1`` (before the typed record): the same fields, merged as a dict;
  read as ``envbuild.run/2``. A run.json with no ``schema`` is taken for /1.
- smoke.json, a native ``verdict`` before the one judge (``{passed, metric, value, threshold,
  reason, status?, completion}``, e.g. docs/results/h100-offline-run1.json, h200x2-run4): mapped
  onto ``envbuild.record.verdict.Verdict``. The word: ``status`` (pass / not-judged / fail) where
  it was written, else from ``passed`` (before the completion check: true without a threshold
  was then a pass and is NOT JUDGED now); a failure with no value is NOTHING FOUND unless the run
  did not complete. A threshold it was compared with is kept, saying that its GPU was not
  recorded. A section with metrics and no verdict at all is NOT JUDGED, saying so.
- preflight.json without ``recipe`` (a verdict before ``envbuild.compat.check.Verdict``, kept
  by tests/data and hand-made runs: ``{verdict|status, feasible?, violations|refusals|findings|
  problems|errors}``): mapped onto ``Verdict``, its items onto ``Violation`` (items at
  severity info/ok/pass dropped, as the report did).
- run.json without a ``selection`` (before provision recorded how it reached its nodes, or a
  launch run with no provision run to copy it from): ``selection(run)`` gives the selection its
  options held (``hosts``, ``inventory``, ``identity_file``, ``known_hosts``, ``insecure``),
  else its ``hosts`` (``["local"]``: the controller); None when it names no node. Read through
  ``RunRecord.selection``; run.json itself stays as written.
- launch.json ``status`` in the words before the one vocabulary (``pass`` / ``not-judged`` /
  ``fail``): mapped onto ``PASS`` / ``NOT JUDGED`` / ``FAIL`` (``launch``).
"""

from __future__ import annotations

from typing import Any

from envbuild.connect.selection import NodeSelection
from envbuild.errors import InputError
from envbuild.record.run import RUN_SCHEMA, RunInfo

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


OLD_WORDS = {"pass": "PASS", "not-judged": "NOT JUDGED", "fail": "FAIL"}
UNRECORDED_GPU = "an older smoke.json: the GPU the threshold applies to was not recorded"


def smoke(data: dict[str, Any]) -> dict[str, Any]:
    """smoke.json data with its native verdict in the current shape."""
    native = data.get("native")
    if not isinstance(native, dict) or native.get("ran") is False:
        return data
    raw = native.get("verdict")
    if isinstance(raw, dict) and "verdict" in raw:
        return data
    return {**data, "native": {**native, "verdict": old_verdict(native, raw if isinstance(raw, dict) else None)}}


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def old_verdict(native: dict[str, Any], raw: dict[str, Any] | None) -> dict[str, Any] | None:
    """A native section's verdict written before the one judge, as ``Verdict`` data (module
    docstring); None when the section holds nothing to judge."""
    metric = str((raw or {}).get("metric") or native.get("metric") or "")
    if raw is None:
        metrics: dict = native["metrics"] if isinstance(native.get("metrics"), dict) else {}
        value = _num(metrics.get(metric))
        if not metric or value is None:
            return None
        raw = {"metric": metric, "value": value, "status": "not-judged",
               "reason": f"{metric} = {value:.6g}: no verdict was stored with this result"}
    value, threshold = _num(raw.get("value")), _num(raw.get("threshold"))
    passed = raw.get("passed")
    word = OLD_WORDS.get(str(raw.get("status")), {True: "PASS" if threshold is not None else "NOT JUDGED",
                                                  None: "NOT JUDGED"}.get(passed, "FAIL"))
    done = raw.get("completion") if isinstance(raw.get("completion"), dict) else None
    if value is None and word == "FAIL" and (done or {}).get("state") in (None, "complete"):
        word = "NOTHING FOUND"
    compared = ({"kind": "threshold", "value": threshold, "required": threshold, "source": UNRECORDED_GPU}
                if threshold is not None and word in ("PASS", "FAIL") and value is not None else None)
    return {"verdict": word, "metric": metric or "?", "value": value, "unit": str(native.get("unit") or ""),
            "higher_is_better": native.get("higher_is_better", True) is not False,
            "completion": {k: v for k, v in done.items() if k in COMPLETION_KEYS} if done else None,
            "compared": compared, "reason": str(raw.get("reason") or "")}


COMPLETION_KEYS = ("state", "detail", "planned", "reached", "sources", "runs")


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


def selection(run: RunInfo) -> NodeSelection | None:
    """How ``run`` reaches its nodes: the selection it recorded; for a run that recorded none,
    its options', else its hosts (module docstring); None when it names no node."""
    if run.selection is not None:
        return run.selection
    opts = run.options
    hosts = opts.get("hosts") if isinstance(opts.get("hosts"), str) else None
    inventory = opts.get("inventory") if isinstance(opts.get("inventory"), str) else None
    if not hosts and not inventory:
        if run.hosts == ["local"]:
            return NodeSelection(local=True)
        hosts = ",".join(run.hosts) or None
    if not hosts and not inventory:
        return None
    key = opts.get("identity_file") if isinstance(opts.get("identity_file"), str) else None
    known = opts.get("known_hosts")
    known = known if isinstance(known, list) else []
    return NodeSelection(hosts=hosts, inventory=inventory, identity_file=key,
                         known_hosts=tuple(k for k in known if isinstance(k, str)), insecure=opts.get("insecure") is True)


def launch(data: dict[str, Any]) -> dict[str, Any]:
    """launch.json data with its ``status`` in the one verdict vocabulary."""
    status = data.get("status")
    return {**data, "status": OLD_WORDS[status]} if isinstance(status, str) and status in OLD_WORDS else data
