"""The run's events, as events.jsonl holds them: one ``Event`` a line ({ts, host, step, kind,
msg}), the kinds written there (``KINDS``) and the progress-only kinds (``TRANSIENT``).

The executor makes them (``envbuild.execute.events``: ansible-runner's raw events -> these) and
the CLI's progress display reads them (``envbuild.cli.progress``); both read this one type.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

#: step events: written to events.jsonl, printed (JSON Lines with --json)
KINDS = ("start", "ok", "changed", "skipped", "rerun", "failed", "unreachable", "interrupted",
         "waiting")  # waiting: for the lock of a prefix another run holds (step "prefix-lock")
#: progress only, never written to events.jsonl nor printed as JSON Lines: "pending" (msg: the step ids the host will run, one
#: per line), "task" (msg: the Ansible task the host started), "output" (msg: what a task returned)
TRANSIENT = frozenset({"pending", "task", "output"})
#: the provision role's bookkeeping tasks (all named "Envbuild ..."): the state check, whose
#: result says which steps run, and the marker written after a step whose last batch is not a
#: node batch (its change is not the step's; a last node batch writes the marker itself and
#: reports only its actions' change)
BOOKKEEPING = "Envbuild "


@dataclass
class Event:
    """One line of events.jsonl: {ts, host, step, kind, msg}."""

    ts: float
    host: str
    step: str | None
    kind: str  # one of KINDS, or a TRANSIENT progress kind
    msg: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @property
    def transient(self) -> bool:
        return self.kind in TRANSIENT
