"""The no-op check: one probe per node (step markers, effects, observed environment); when
every step of every node is done and holds, the run is recorded without starting Ansible."""

from __future__ import annotations

import json
import time
from typing import Callable

from envbuild import rundir
from envbuild.actions.nodestate import parse_probe, plan_steps, probe_call
from envbuild.connect import ssh
from envbuild.connect.nodes import Node
from envbuild.execute.events import Event, EventSink
from envbuild.observe import expected_state, observe_args
from envbuild.plan.model import Plan
from envbuild.provision.collect import observe
from envbuild.provision.tracker import rerun_fields
from envbuild.record import RunWriter


def probe_args(plan: Plan) -> tuple:
    """What a probe of ``plan`` sends: (python, prefix, steps with digests and effects, observe args)."""
    if plan.backend == "container":  # the environment is in the image: the node's python3 checks
        return ("python3", plan.prefix, plan_steps(plan), None)  # the steps; observed in the image
    return (f"{plan.prefix.rstrip('/')}/bin/python", plan.prefix, plan_steps(plan),
            observe_args(expected_state(None, plan)))


def probe_nodes(nodes: list[Node], plans: dict[str, Plan]) -> dict:
    """{node: Probe or None}: each node's step markers, step effects (the checks Ansible's
    envbuild_state makes) and observed environment in one command run by the environment's
    python (None: it could not run, e.g. no environment yet)."""
    def one(node: Node):
        python, prefix, steps, observe = probe_args(plans[node.name])
        call = probe_call(python, prefix, steps, refresh=True, observe=observe)
        rc, out, _err = ssh.run(node, call.command, stdin=call.stdin)
        return parse_probe(out, node.name) if rc == 0 else None

    return {name: (None if isinstance(got, Exception) else got) for name, got in ssh.each(nodes, one).items()}


def nothing_to_do(rd: rundir.RunDir, sink: EventSink, nodes: list[Node], plans: dict[str, Plan],
                   probes: dict, finish_node: Callable[..., None]) -> None:
    """Record a run in which every step of every node was done and its effect held: what
    Ansible would have recorded (every step skipped), the observed state, no Ansible."""
    RunWriter(rd).update(ansible="not started: every step done and its effect holds on every node")
    for node in nodes:
        record_done(rd, sink, node, plans[node.name], probes[node.name], finish_node)


def record_done(rd: rundir.RunDir, sink: EventSink, node: Node, plan: Plan, probe, finish_node: Callable[..., None],
                note: str = "") -> None:
    """Record one node whose every step was found done with its effect holding (``probe``):
    each step skipped, the node ok, its observed environment. ``note``: said after each step
    (e.g. whose install of a shared prefix it uses)."""
    now = time.time()
    effects = probe.state.get("effects") or {}
    lines = []
    for step in plan.steps:
        detail = (effects.get(step.id) or {}).get("detail") or "marker only (no observable effect)"
        sink.emit(Event(now, node.name, step.id, "skipped", f"done; {detail}{note}"))
        lines.append(f"skipped {step.id}: done; {detail}{note}")
    rd.write_node(node.name, "log.txt", "\n".join(lines) + "\n")
    finish_node(node.name, "ok", skipped=[s.id for s in plan.steps], **rerun_fields(probe.state))
    if probe.observed is not None:
        from envbuild.observe import parse_observed

        obs = parse_observed(json.dumps(probe.observed), node.name)
        rd.write_node(node.name, "observed.json", obs.model_dump(mode="json", by_alias=True))
    elif plan.backend == "container":  # observed inside the image
        observe(rd, node, plan, None)
