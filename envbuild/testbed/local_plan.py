"""Run a plan on this machine through the real executor (render -> ansible-runner), for tests.

    rc, host, events = run_local_plan(tmp_path, plan)
"""

from __future__ import annotations

import json
from pathlib import Path

from envbuild.connect.nodes import connection_vars, local_node
from envbuild.execute import ansible as ex
from envbuild.execute.events import EventSink, HostTrack, StepTracker
from envbuild.plan.model import Plan
from envbuild.render.ansible import render


def run_local_plan(tmp_path: Path, plan: Plan, *, connection: dict | None = None,
                   node_path: str | None = None) -> tuple[int, HostTrack, list[dict]]:
    """Render ``plan`` for the local node (``connection`` overrides its Ansible variables,
    ``node_path`` its search path), run the playbook, return (rc, the host's track, events)."""
    rd = tmp_path / "run"
    node = local_node()
    conn = {**connection_vars(node), "ansible_remote_tmp": str(rd / "remote"), **(connection or {})}
    rendered = render({"local": plan}, {"local": conn}, {"local": node_path or node.node_path},
                      run_dir=str(rd), cache_dir=str(tmp_path / "cache"))
    job = ex.prepare(rd / "ansible", rendered, forks=1, insecure=False)
    tracker = StepTracker()
    sink = EventSink(rd / "events.jsonl")
    try:
        rc = ex.run(job, sink, tracker)
    finally:
        sink.close()
    rc = rc.rc if hasattr(rc, "rc") else rc
    events = [json.loads(x) for x in (rd / "events.jsonl").read_text().splitlines()]
    return rc, tracker.hosts.get("local") or HostTrack(), events
