"""Progress events: ansible-runner's raw events -> envbuild step events, logs and results.

``StepTracker.feed(raw)`` is pure bookkeeping (no I/O): it follows each host through the plan
markers the provision role emits (``envbuild:start <id>``, ``envbuild:done <id>``; its tasks
``STATE_TASK`` and ``RECORD_TASK``; ``NODE_STEP_TASK`` + id, a step that is one task, whose
start and end are the step's: playbooks/.../roles/provision/tasks), keeps each node's
log, and records what failed (step, command, exit code, message); ``HostTrack.current`` is the
step a host is in right now (what an interrupted run records), and ``StepTracker.completed``
says the playbook reached its end (``playbook_on_stats``). ``EventSink`` writes the events to
``events.jsonl`` (0600, secrets masked) and to the terminal (JSON Lines with ``--json``, else
through ``echo``).

Besides the step events (``KINDS``), the tracker yields transient progress events
(``TRANSIENT``: the steps a host will run, the task it is in, the output a task returned) as
runner events arrive; they are never written to events.jsonl nor to the JSON Lines stream, and
reach only an ``echo`` that has an ``event(Event)`` method (the CLI's progress display,
``envbuild.cli.progress``), which also receives every step event instead of a text line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable
from envbuild.node.stage import SOURCES as STAGE_SOURCES, describe as describe_stage
from envbuild.record.events import Event
from envbuild.redact import Redactor

LOG_TAIL_LINES = 30
OUTPUT_LINES = 20  # lines of a task's output in one transient "output" event

#: the provision role's bookkeeping tasks (all named "Envbuild ..."): the state check, whose
#: result says which steps run, and the marker written after a step whose last batch is not a
#: node batch (its change is not the step's; a last node batch writes the marker itself and
#: reports only its actions' change)
STATE_TASK = "Envbuild state"
RECORD_TASK = "Envbuild record"
#: a step that is one node batch (``form: node``, tasks/step_node.yml) is one task named this,
#: then its id: the task's start is the step's start, its end the step's end
NODE_STEP_TASK = "Envbuild node step "
#: what such a task is called in logs, failures and the live view: the name the step's work has
#: as a batch of a longer step (tasks/batch_node.yml), not the role's bookkeeping
NODE_TASK = "Node actions"
#: tasks a node delegates to another node (``provision --fanout``: its holder sends it the
#: fleet's archive); their holder being unreachable is not this node's: it falls back. Known by
#: name: a runner event of an unreachable delegated task names the node, the task and the
#: module, never the host delegated to (ansible-core 2.19 leaves ``_ansible_delegated_vars`` out
#: of an unreachable result, and ``ignore_unreachable`` out of the event)
HOLDER_TASK = "Envbuild holder"
#: the module that says where a node's copy of the fleet's archive came from: its result's
#: ``stage`` ({source, holder, why}, envbuild/node/stage.py), shown as ``describe_stage`` says
STAGE_MODULE = "envbuild.node.envbuild_stage"


def task_name(raw_task: str) -> str:
    """A runner event's task name without the role's prefix (``provision : Envbuild state``)."""
    return raw_task.split(" : ", 1)[1] if " : " in raw_task else raw_task


@dataclass
class HostTrack:
    """What one host did during the run."""

    current: str | None = None
    current_changed: bool = False
    changed: list[str] = field(default_factory=list)
    ok: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed_step: str | None = None
    command: str | None = None
    rc: int | None = None
    message: str = ""
    unreachable: bool = False
    stage_from: str | None = None  # provision --fanout: the node or "controller (why)" its archive came from
    log: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.time)
    finished: float | None = None

    def tail(self, n: int = LOG_TAIL_LINES) -> str:
        lines = "\n".join(self.log).splitlines()
        return "\n".join(lines[-n:])


def _cmd_text(cmd) -> str | None:
    if cmd is None:
        return None
    if isinstance(cmd, list):
        import shlex

        return " ".join(shlex.quote(str(c)) for c in cmd)
    return str(cmd)


def _failed_res(res: dict) -> dict:
    """The failing item of a loop result, or the result itself."""
    for item in res.get("results") or []:
        if isinstance(item, dict) and item.get("failed"):
            return item
    return res


def _stage(data: dict, res: dict) -> dict | None:
    """The ``stage`` an event of the module ``STAGE_MODULE`` returned, else None."""
    stage = res.get("stage")
    if STAGE_MODULE not in (data.get("resolved_action"), data.get("task_action")) or not isinstance(stage, dict):
        return None
    return stage if stage.get("source") in STAGE_SOURCES else None


class StepTracker:
    """Turns raw runner events into step events; keeps per-host state."""

    def __init__(self) -> None:
        self.hosts: dict[str, HostTrack] = {}
        self.completed = False  # the playbook ran to its end (its stats event arrived)
        self.stats: dict = {}  # that event's counts per host: {"failures": {host: n}, "dark": ...}

    def host(self, name: str) -> HostTrack:
        return self.hosts.setdefault(name, HostTrack())

    def feed(self, raw: dict) -> list[Event]:
        etype = raw.get("event", "")
        data = raw.get("event_data") or {}
        if etype == "playbook_on_stats":
            self.completed = True
            self.stats = {k: v for k, v in data.items() if isinstance(v, dict)}
            return []
        name = data.get("host")
        if not name or not etype.startswith("runner_on_"):
            return []
        h = self.host(name)
        res = data.get("res") or {}
        task = task_name(str(data.get("task") or ""))
        node_step = task[len(NODE_STEP_TASK):] if task.startswith(NODE_STEP_TASK) else None
        if node_step is not None:
            task = NODE_TASK
        now = time.time()
        out: list[Event] = []
        msg = str(res.get("msg") or "")
        logged = len(h.log)
        here = h.current  # the step this task ran in (a step's own task ends it below)
        if etype == "runner_on_start":
            if node_step is not None:
                h.current, h.current_changed = node_step, False
                out.append(Event(now, name, h.current, "start", ""))
            return [*out, Event(now, name, h.current, "task", task)]
        if etype == "runner_on_ok":
            self._log(h, task, res)
            if task == STATE_TASK:
                for sid in res.get("done") or []:
                    h.skipped.append(sid)
                    out.append(Event(now, name, sid, "skipped", "already done (digest matches)"))
                out.append(Event(now, name, None, "pending", "\n".join(str(x) for x in res.get("pending") or [])))
            elif msg.startswith("envbuild:start "):
                h.current, h.current_changed = msg.split(" ", 1)[1], False
                out.append(Event(now, name, h.current, "start", ""))
            elif (stage := _stage(data, res)) is not None:
                h.stage_from = describe_stage(stage)
                out.append(Event(now, name, h.current, "output", "the fleet's archive from " + h.stage_from))
            elif msg.startswith("envbuild:done "):
                out.append(self._done(h, name, msg.split(" ", 1)[1], now))
            elif node_step is not None:
                h.current_changed = bool(res.get("changed"))
                out.append(self._done(h, name, node_step, now))
            elif res.get("changed") and task != RECORD_TASK:
                h.current_changed = True
        elif etype == "runner_on_failed" and not data.get("ignore_errors"):
            fres = _failed_res(res)
            self._log(h, task, fres)
            h.failed_step = h.current or "envbuild:state"  # before any step: the state check
            h.command = _cmd_text(fres.get("cmd"))
            h.rc = fres.get("rc")
            h.message = str(fres.get("msg") or "").strip()
            h.finished = now
            text = h.message or (fres.get("stderr") or "").strip()[-300:]
            out.append(Event(now, name, h.failed_step, "failed", f"{task}: {text}"))
        elif etype == "runner_on_unreachable" and task.startswith(HOLDER_TASK):
            self._log(h, task, res)  # the holder is out of reach: this node takes the controller's copy
        elif etype == "runner_on_unreachable":
            self._log(h, task, res)
            h.unreachable = True
            h.failed_step = h.current
            h.message = msg.strip()
            h.finished = now
            out.append(Event(now, name, h.current, "unreachable", h.message))
        text = h.log[logged + 1:]  # what this task printed, after its TASK [...] line
        if text:
            lines = "\n".join(text).splitlines()[-OUTPUT_LINES:]
            out.insert(0, Event(now, name, h.current or here, "output", "\n".join(lines)))
        return out

    @staticmethod
    def _done(h: HostTrack, name: str, sid: str, now: float) -> Event:
        """Step ``sid`` of host ``h`` ended well: changed if a task of it changed something."""
        (h.changed if h.current_changed else h.ok).append(sid)
        h.current = None
        return Event(now, name, sid, "changed" if h.current_changed else "ok", "")

    @staticmethod
    def _log(h: HostTrack, task: str, res: dict) -> None:
        h.log.append(f"TASK [{task}]")
        if res.get("cmd") is not None:
            h.log.append(f"$ {_cmd_text(res.get('cmd'))}")
        for key in ("stdout", "stderr"):
            text = res.get(key)
            if text:
                h.log.append(str(text).rstrip())
        if res.get("rc") not in (None, 0):
            h.log.append(f"exit code {res.get('rc')}")
        if res.get("msg") and (res.get("failed") or res.get("unreachable")):
            h.log.append(f"msg: {res.get('msg')}")
        for item in res.get("results") or []:
            if isinstance(item, dict) and (item.get("stdout") or item.get("stderr")):
                StepTracker._log(h, f"{task} (item)",
                                 {k: item.get(k) for k in ("cmd", "stdout", "stderr", "rc", "msg", "failed")})


class EventSink:
    """Writes each step event to events.jsonl and shows it: a JSON line on stdout (``--json``:
    ``{"type": "event", ...}``), else ``echo.event(ev)`` when ``echo`` has that method (a progress
    display; it also gets the TRANSIENT events), else ``echo(describe(ev))`` (a text line)."""

    def __init__(self, path: Path | None, *, json_lines: bool = False,
                 echo: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.json_lines = json_lines
        self._fh = (open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "a", encoding="utf-8")
                    if path else None)
        self._echo = echo
        self._on_event: Callable[[Event], None] | None = getattr(echo, "event", None)
        self.redactor = Redactor()

    def emit(self, ev: Event) -> None:
        if ev.msg:
            ev = replace(ev, msg=self.redactor.text(ev.msg))
        if ev.transient:
            if self._on_event is not None and not self.json_lines:
                self._on_event(ev)
            return
        line = ev.to_json()
        if self._fh:
            self._fh.write(line + "\n")
            self._fh.flush()
        if self.json_lines:
            sys.stdout.write(json.dumps({"type": "event", **asdict(ev)}, sort_keys=True) + "\n")
            sys.stdout.flush()
        elif self._on_event is not None:
            self._on_event(ev)
        elif self._echo is not None:
            self._echo(self.describe(ev))

    @staticmethod
    def describe(ev: Event) -> str:
        style = {"start": "cyan", "ok": "green", "changed": "yellow", "skipped": "dim", "rerun": "yellow",
                 "failed": "bold red", "unreachable": "bold red", "interrupted": "bold red"}.get(ev.kind, "default")
        text = f"[{style}]{ev.kind:>11}[/] {ev.host:<16} {ev.step or '-'}"
        return text + (f"  {ev.msg}" if ev.msg and ev.kind in ("failed", "unreachable", "interrupted", "rerun") else "")

    def close(self) -> None:
        if self._fh:
            self._fh.close()
            self._fh = None
