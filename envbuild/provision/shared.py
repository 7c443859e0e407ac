"""A prefix shared by several nodes (``Target.shared_prefix``: NFS, Lustre, GPFS): one node
installs it, the others check it and use it.

Within a run, the first node of each prefix installs it (Ansible runs on it alone); once it is
done, each other node is probed as any node is (step markers, effects, the observed
environment, read by its own Python through the shared file system) and recorded ok only when
every step is done and holds there. A node that does not see the install (the prefix is not on
a file system it mounts, or differs on it) fails, saying so: the node's observed state decides,
not the installer's markers. Between runs and controllers the lock on the prefix itself keeps
them apart (``envbuild.execute.prefixlock.on_nodes``): a second controller waits, then finds
nothing to do. The smoke step runs on the installing node only, as said in each user's log.
"""

from __future__ import annotations

from typing import Callable

from envbuild import rundir
from envbuild.connect.nodes import Node
from envbuild.execute.events import EventSink
from envbuild.plan.model import Plan
from envbuild.provision.noop import probe_nodes, record_done


def users(nodes: list[Node], plans: dict[str, Plan], *, shared: bool) -> dict[str, str]:
    """``{node: the node that installs the prefix it shares}`` for each node that only uses a
    shared prefix (none where the target's prefix is not shared)."""
    if not shared:
        return {}
    first: dict[str, str] = {}
    out = {}
    for node in nodes:
        plan = plans.get(node.name)
        if plan is None:
            continue
        key = plan.prefix.rstrip("/") or "/"
        if key in first:
            out[node.name] = first[key]
        else:
            first[key] = node.name
    return out


def record_users(rd: rundir.RunDir, sink: EventSink, nodes: list[Node], plans: dict[str, Plan],
                 installed_by: dict[str, str], results, finish_node: Callable[..., None]) -> None:
    """After the installers' run: probe each user node and record it ok when it sees the whole
    environment done, else failed with why (its installer failed, or it does not see the install)."""
    ready = [n for n in nodes if (results.get(installed_by[n.name]) or {}).get("status") == "ok"]
    for node in nodes:
        if node not in ready:
            installer = installed_by[node.name]
            status = (results.get(installer) or {}).get("status", "not run")
            finish_node(node.name, "failed", failed_step="shared-prefix",
                        log_tail=f"{plans[node.name].prefix} is shared with {installer}, which did not install "
                                 f"it (status {status}): nothing to use")
    probes = probe_nodes(ready, plans) if ready else {}
    for node in ready:
        installer, plan, probe = installed_by[node.name], plans[node.name], probes.get(node.name)
        if probe is not None and not probe.state.get("pending"):
            record_done(rd, sink, node, plan, probe, finish_node,
                        note=f" (the shared prefix, installed by {installer}; its smoke ran there)")
            continue
        if probe is None:
            why = "the environment's python does not run here"
        else:
            first = probe.state["pending"][0]
            why = f"step {first}: {probe.state.get('reasons', {}).get(first, 'not done')}"
        msg = (f"{plan.prefix} is shared with {installer}, which installed it, but not as {node.name} sees it "
               f"({why}): is the prefix on a file system every node mounts?")
        rd.write_node(node.name, "log.txt", msg + "\n")
        finish_node(node.name, "failed", failed_step="shared-prefix", log_tail=msg)
