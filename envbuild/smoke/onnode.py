"""Smoke on provisioned nodes: what the smoke role runs, and the smoke.json it leaves.

The plan's ``smoke`` step says which scripts (``kinds``) and which ``preset``; this module turns
that, the recipe's ``benchmark`` and the node's facts into the runs the role executes (pure),
and reads the fetched outputs back into a node's ``smoke.json`` (``{kind: result, native:
{parser, metric, metrics, verdict}}``, the layout envbuild.report reads).

On the node every run leaves ``<prefix>/.envbuild/smoke/<name>.out`` (stdout), ``.err``
(stderr) and ``.rc`` (exit status); the role fetches them to ``nodes/<host>/smoke/``.

Example::

    >>> runs = node_runs("/opt/env", {"kinds": ["gpt", "collective"], "preset": "tiny"})
    >>> [r["name"] for r in runs], runs[1]["argv"][2:]
    (['gpt', 'collective'], ['--json', '--device', 'cpu', '--nproc', '2'])
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envbuild.smoke import SMOKE_SCRIPTS, read_result, smoke_command
from envbuild.smoke.completion import judge
from envbuild.smoke.native import parse

if TYPE_CHECKING:
    from envbuild.recipes.schema import RunOutput

SMOKE_TIMEOUT_S = 1800
NATIVE_TIMEOUT_S = 3600
FROM_SMOKE = "envbuild-smoke"  # the parser whose benchmark is envbuild's own gpt smoke
PLACEHOLDER = re.compile(r"\{sources\.([A-Za-z0-9_.-]+)\}")


def smoke_dir(prefix: str) -> str:
    """Where the scripts and their outputs lie on the node."""
    return f"{prefix.rstrip('/')}/.envbuild/smoke"


def node_runs(prefix: str, params: dict, benchmark: dict | None = None, *, gpus: int = 0,
              sources: dict[str, str] | None = None, output: RunOutput | None = None) -> list[dict]:
    """The runs of one node's smoke step: ``[{name, script, argv, cwd, env, timeout}]``.

    ``params`` are the plan step's (``kinds``, ``preset``); the scripts run with the
    environment's python, each with its own flags (``envbuild.smoke.smoke_command``). The
    recipe's native benchmark is appended when ``native_run`` finds it runnable here.
    """
    python = f"{prefix.rstrip('/')}/bin/python"
    where = smoke_dir(prefix)
    runs = [{"name": kind, "script": SMOKE_SCRIPTS[kind].name,
             "argv": smoke_command(python, kind, params.get("preset") or "tiny", where, require=True),
             "cwd": where, "env": {}, "timeout": SMOKE_TIMEOUT_S}
            for kind in params.get("kinds") or [] if kind in SMOKE_SCRIPTS]
    native = native_run(benchmark, gpus=gpus, sources=sources or {}, cwd=where, output=output)
    if "argv" in native:
        runs.append(native)
    return runs


def native_run(benchmark: dict | None, *, gpus: int, sources: dict[str, str], cwd: str,
               output: RunOutput | None = None) -> dict:
    """The recipe's own benchmark as a run, or ``{"skip": reason}`` when it cannot run here.

    A benchmark parsed with ``envbuild-smoke`` is the gpt smoke itself (nothing more to run).
    Others run when the node has the GPUs they need and every ``{sources.<name>}`` they name
    is a checkout of this plan. The command runs in the foreground with its training output on
    stdout, taken where the recipe's run says it is (``output``: a trace file, a backgrounded job;
``envbuild.smoke.capture``).
    """
    if not benchmark or not benchmark.get("command"):
        return {"skip": "the recipe has no benchmark"}
    if benchmark.get("parser") == FROM_SMOKE:
        return {"skip": "measured by the gpt smoke"}
    need = int(benchmark.get("needs_gpus") or 0)
    if gpus < need:
        return {"skip": f"needs {need} GPUs, the node has {gpus}"}
    texts = [benchmark["command"], benchmark.get("cwd") or "", *(benchmark.get("env") or {}).values()]
    missing = sorted({m for t in texts for m in PLACEHOLDER.findall(t) if m not in sources})
    if missing:
        return {"skip": f"source checkout not in the plan: {', '.join(missing)}"}

    def fill(text: str) -> str:
        return PLACEHOLDER.sub(lambda m: sources[m.group(1)], text)

    from envbuild.smoke.capture import capture

    return {"name": "native", "script": None,
            "argv": ["bash", "-c", capture(output, fill(benchmark["command"]))],
            "cwd": fill(benchmark.get("cwd") or cwd),
            "env": {k: fill(str(v)) for k, v in (benchmark.get("env") or {}).items()},
            "timeout": NATIVE_TIMEOUT_S}


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
