"""The Ansible event tracker of a provision: steps, plus each node's ``Envbuild state`` answer
(steps run again because their effect did not hold)."""

from __future__ import annotations

import time

from envbuild.execute.events import STATE_TASK, Event, StepTracker, task_name


class StateTracker(StepTracker):
    """A StepTracker that also keeps each node's ``Envbuild state`` answer: which steps run
    again because their effect did not hold, and which run as a repair (pip --force-reinstall)."""

    def __init__(self) -> None:
        super().__init__()
        self.state: dict[str, dict] = {}

    def feed(self, raw: dict) -> list[Event]:
        events = super().feed(raw)
        data = raw.get("event_data") or {}
        if raw.get("event") == "runner_on_ok" and task_name(str(data.get("task") or "")) == STATE_TASK and data.get("host"):
            res = data.get("res") or {}
            self.state[data["host"]] = res
            events += _rerun_events(data["host"], res)
        return events

    def reruns(self, host: str) -> dict:
        """result.json fields: steps run again because their effect did not hold."""
        return rerun_fields(self.state.get(host) or {})


def rerun_fields(state: dict) -> dict:
    return {"effect_failed": dict(state.get("effect_failed") or {}), "repair": list(state.get("repair") or []),
            "rerun_reasons": dict(state.get("reasons") or {})}


def _rerun_events(host: str, state: dict) -> list[Event]:
    now, repair = time.time(), set(state.get("repair") or [])
    return [Event(now, host, sid, "rerun", f"effect does not hold: {detail}; runs again"
                  + (" as a repair (reinstall)" if sid in repair else ""))
            for sid, detail in (state.get("effect_failed") or {}).items()]
