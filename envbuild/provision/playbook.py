"""The Ansible phase of a provision: the playbook run under ``StopRequest`` (SIGINT/SIGTERM stop
ansible's process group), each node's result recorded as Ansible reported it, fail closed."""

from __future__ import annotations

import time

from envbuild import rundir
from envbuild.connect.nodes import Node
from envbuild.execute import ansible as ansible_exec
from envbuild.execute.events import Event, EventSink
from envbuild.execute.livelog import LiveTail, log_paths
from envbuild.interrupt import StopRequest, signal_name, signum_of
from envbuild.plan.model import Plan
from envbuild.provision.collect import merge_smoke, observe, smoke_runs
from envbuild.provision.results import NodeResults, current_step, node_status, record_interrupted
from envbuild.provision.tracker import StateTracker
from envbuild.record import RunWriter
from envbuild.redact import secret_values


def run_playbook(job: ansible_exec.AnsibleJob, rendered, rd: rundir.RunDir, sink: EventSink, results: NodeResults,
                 nodes: list[Node], plans: dict[str, Plan], *, recipe, lock_text: str | None,
                 json_lines: bool) -> int | None:
    """Run the playbook on ``nodes`` and record each one; the signal that interrupted it, or None.
    An error (or a second signal) records every node not yet finished, and the run, then raises."""
    masked = secret_values(rendered.inventory)  # ansible_password & co. of an inventory
    rd.redactor.add(masked)
    sink.redactor.add(masked)
    tracker = StateTracker()  # a StepTracker that also keeps each node's Envbuild state answer
    smoke_of = {n.name: smoke_runs(plans[n.name]) for n in nodes}
    started = time.time()
    stop = StopRequest()  # SIGINT/SIGTERM from here on: stop ansible's process group, record, exit 128+n
    try:
        with stop:
            # the build logs of local nodes, tailed live into the progress display (remote
            # nodes keep theirs on the node: envbuild.execute.livelog)
            local_logs = {} if json_lines else {n.name: log_paths(plans[n.name]) for n in nodes if n.is_local}
            with LiveTail(local_logs, sink.emit):
                ran = ansible_exec.execute(job, sink, tracker, stop, mask=masked)
            duration = round(time.time() - started, 2)
            for node in nodes:
                t = tracker.hosts.get(node.name)
                rd.write_node(node.name, "log.txt", "\n".join(t.log) + "\n" if t else "")
                status, step, why = node_status(node.name, t, ran, tracker, plans[node.name])
                if status == "interrupted":
                    sink.emit(Event(time.time(), node.name, step, "interrupted", f"by {signal_name(ran.signum or 2)}"))
                if t is None:
                    results.finish(node.name, status, failed_step=step, log_tail=why)
                    continue
                results.finish(node.name, status, failed_step=step, command=t.command, rc=t.rc,
                               log_tail=(why + "\n" if why else "") + t.tail(),
                               changed=t.changed + t.ok, skipped=t.skipped,
                               duration_s=round((t.finished or time.time()) - started, 2) if step else duration,
                               fleet_from=t.stage_from, **tracker.reruns(node.name))
                if ran.signum is not None or stop.requested:
                    continue  # interrupted: touch the nodes no more
                if status == "ok" or t.failed_step == "smoke":  # installed either way: record what is there
                    observe(rd, node, plans[node.name], lock_text)
                if status in ("ok", "failed"):
                    merge_smoke(rd, node.name, smoke_of[node.name], recipe)
        signum = ran.signum or stop.signum
        if signum is not None:
            record_interrupted(rd, results, [n.name for n in nodes], tracker, signum)
        return signum
    except BaseException as exc:  # an interrupt or an error in the middle is never "ok"
        signum = signum_of(exc)
        if signum is not None:
            record_interrupted(rd, results, [n.name for n in nodes], tracker, signum)
        else:
            for name in (n.name for n in nodes if n.name not in results):
                results.finish(name, "error", failed_step=current_step(tracker, name),
                               log_tail=f"{type(exc).__name__}: {exc}")
            RunWriter(rd).finish("error", error=f"{type(exc).__name__}: {exc}")
        raise
