"""A run's outcome, fail closed: each node's status after the playbook, an interrupted run,
the finished run's verdict, and the exit code (0 only when every node is ok and the report
says PASS)."""

from __future__ import annotations

import time

from envbuild import rundir
from envbuild.execute import ansible as ansible_exec
from envbuild.errors import NOT_JUDGED
from envbuild.execute.events import Event, EventSink, StepTracker
from envbuild.interrupt import signal_name, signum_of
from envbuild.plan.model import Plan
from envbuild.record import RunWriter

EXIT = {"failed": 4, "unreachable": 3, "refused": 1}


def current_step(tracker: StepTracker, host: str) -> str | None:
    t = tracker.hosts.get(host)
    return t.current if t else None


def node_status(host: str, t, ran: ansible_exec.RunResult, tracker: StepTracker,
                 plan: Plan) -> tuple[str, str | None, str]:
    """(status, step, why) of one node after the playbook: ok only when ansible-runner's status,
    the playbook's end and every plan step say so (fail closed)."""
    if t is not None and t.unreachable:
        return "unreachable", t.failed_step, t.message
    if t is not None and t.failed_step:
        return "failed", t.failed_step, t.message
    current = t.current if t is not None else None
    done = set(t.changed) | set(t.ok) | set(t.skipped) if t is not None else set()
    missing = [s.id for s in plan.steps if s.id not in done]
    if (ran.signum is not None or ran.status == "canceled") and (current or missing):
        from envbuild.interrupt import signal_name

        return ("interrupted", current,
                f"interrupted by {signal_name(ran.signum or 2)}" + (f" during {current}" if current else ""))
    if t is None:
        return "unreachable", None, "ansible reported nothing for this host"
    if ran.status == "timeout":
        return "failed", current or "ansible", "ansible-runner timed out"
    if not tracker.completed:
        return "failed", current or "ansible", f"ansible-playbook ended ({ran.status}, rc {ran.rc}) before this node finished"
    if any((tracker.stats.get(k) or {}).get(host) for k in ("failures", "dark")):
        return "failed", current or "ansible", "ansible counted a failure on this node outside the plan's steps"
    if missing:
        return "failed", missing[0], f"ansible reported no result for step(s): {', '.join(missing)}"
    return "ok", None, ""


def record_interrupted(rd: rundir.RunDir, results: dict[str, dict], hosts: list[str], tracker: StepTracker,
                 signum: int) -> None:
    """Record an interrupted run: each node not yet finished is "interrupted" at the step it was in."""
    name = signal_name(signum)
    for host in hosts:
        res = results.get(host)
        if res is not None and res["status"] != "interrupted":
            continue  # it had finished (ok, failed, unreachable) before the signal
        step = (res["failed_step"] if res else None) or current_step(tracker, host)
        res = {"command": None, "rc": None, "log_tail": "", "changed": [], "skipped": [], "duration_s": 0.0,
               **(res or {}), "status": "interrupted", "failed_step": step, "signal": name}
        results[host] = RunWriter(rd).node_result(host, res).model_dump(mode="json")
    RunWriter(rd).finish("interrupted", signal=name, interrupted_at={h: results[h]["failed_step"] for h in hosts})


def finish(rd: rundir.RunDir, results: dict[str, dict], n: int) -> tuple[str, int]:
    """A finished (non-dry, uninterrupted) run: status, the report's verdict, runs/latest.
    The exit code follows the verdict: 0 only for PASS (``verdict_exit``)."""
    status = _overall(results, n)
    writer = RunWriter(rd)
    writer.finish(status)
    code = exit_code(results)
    try:
        from envbuild.report import collect

        verdict = collect(rd.path).verdict
        fields = dict(verdict=verdict.status, verdict_reasons=[r.model_dump(mode="json") for r in verdict.reasons],
                      verdict_not_judged=verdict.not_judged)
        word = verdict.status
    except Exception as exc:  # noqa: BLE001 - a run that cannot be judged did not pass
        fields = dict(verdict="FAIL", verdict_reasons=[{"kind": "report", "message": f"{type(exc).__name__}: {exc}"}])
        word = "FAIL"
    writer.update(**fields, exit_code=verdict_exit(code, word))
    rd.publish()
    return status, verdict_exit(code, word)


def verdict_exit(code: int, verdict: str) -> int:
    """The node's exit code when one is set; else 1 for FAIL, 5 (NOT_JUDGED) for NOT JUDGED,
    0 only for PASS."""
    return code or {"PASS": 0, "NOT JUDGED": NOT_JUDGED}.get(verdict, 1)


def _overall(results: dict[str, dict], n: int) -> str:
    ok = sum(1 for r in results.values() if r["status"] == "ok")
    return "ok" if ok == n else "failed" if ok == 0 else "partial"


def exit_code(results: dict[str, dict]) -> int:
    """4 a node failed a step (or ansible timed out / ended early), 3 unreachable, 1 refused;
    0 only when every node is ok. (Interrupts exit 128 + signal; see provision().)"""
    statuses = {r["status"] for r in results.values()}
    for status in ("failed", "error", "unreachable", "refused"):
        if status in statuses:
            return EXIT.get(status, 4)
    return 0 if statuses <= {"ok"} else 4


class NodeResults(dict):
    """{node: result} of a run; ``finish`` sets one and writes its ``nodes/<node>/result.json``."""

    def __init__(self, rd: rundir.RunDir, insecure: dict[str, bool]):
        super().__init__()
        self.rd, self.insecure = rd, insecure  # insecure: host keys not checked (recorded, reported)

    def finish(self, name: str, status: str, **extra) -> None:
        res = {"status": status, "failed_step": None, "command": None, "rc": None, "log_tail": "",
               "changed": [], "skipped": [], "duration_s": 0.0,
               "insecure": self.insecure.get(name, False), **extra}
        self[name] = RunWriter(self.rd).node_result(name, res).model_dump(mode="json")


def record_stopped(rd: rundir.RunDir, sink: EventSink, results: NodeResults, hosts: list[str], phase: str,
                   exc: BaseException) -> None:
    """Record a run stopped before Ansible started, in ``phase`` (facts, preflight, lock, plan,
    render, probe), by a signal or an error: each node without a result yet is "interrupted"
    (or "error") at ``phase``, and so is the run: never "running", never a pass, never latest."""
    signum = signum_of(exc)
    status = "error" if signum is None else "interrupted"
    why = f"{type(exc).__name__}: {exc}" if signum is None else f"interrupted by {signal_name(signum)}"
    extra = {} if signum is None else {"signal": signal_name(signum)}
    stopped = [h for h in hosts if h not in results]
    for host in stopped:
        tail = why
        try:
            sink.emit(Event(time.time(), host, phase, "failed" if signum is None else "interrupted", why))
        except OSError as e:  # its display is gone (`--json | head` closed the pipe) or its file cannot
            # be written: the node's result says the event was lost, and run.json still says the stop
            tail = f"{why} (its event was not shown: {type(e).__name__}: {e})"
        results.finish(host, status, failed_step=phase, log_tail=tail, **extra)
    if signum is None:
        RunWriter(rd).finish(status, phase=phase, error=why)
    else:
        RunWriter(rd).finish(status, phase=phase, **extra, interrupted_at={h: phase for h in stopped})
