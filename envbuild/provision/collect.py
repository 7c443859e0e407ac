"""What a provision records from a node after its steps: the observed environment and the
smoke results."""

from __future__ import annotations

import json

from envbuild import rundir
from envbuild.connect import ssh
from envbuild.connect.nodes import Node
from envbuild.observe import (expected_state, image_observe_command, observe_args, observe_command,
                              parse_observed)
from envbuild.plan.model import Plan
from envbuild.record import RunWriter
from envbuild.smoke.hardware import node_gpus
from envbuild.smoke.onnode import collect_node


def observe(rd: rundir.RunDir, node: Node, plan: Plan, lock_text: str | None) -> None:
    """observed.json from the live node (envbuild.observe's node script)."""
    import yaml

    lock = yaml.safe_load(lock_text) if lock_text else None
    exp = expected_state(lock, plan)
    cmd = observe_command(f"{plan.prefix}/bin/python", observe_args(exp))
    if plan.backend == "container":
        cmd = image_observe_command(plan)
    rc, out, err = ssh.run(node, cmd)
    if rc == 0:
        rd.write_node(node.name, "observed.json", parse_observed(out, node.name).model_dump(mode="json", by_alias=True))


def smoke_runs(plan: Plan) -> tuple[list[dict], str | None]:
    """(the plan's smoke runs, why the native benchmark does not run here)."""
    step = plan.smoke() or plan.image_smoke()  # a node plan has one or the other (its image's)
    if step is None:
        return [], None
    return [r.model_dump(mode="json") for r in step.params.runs], step.params.native_skip


def _facts(path) -> dict | None:  # noqa: ANN001
    """A node's facts.json, None when it is absent or unreadable (the GPU is then not known)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def merge_smoke(rd: rundir.RunDir, host: str, runs: tuple[list[dict], str | None], recipe) -> None:
    """nodes/<host>/smoke.json from the role's fetched outputs (nothing when smoke did not run)."""
    names = [r["name"] for r in runs[0]]
    folder = rd.node(host) / "smoke"
    if not names or not folder.is_dir():
        return
    gpu, gpus = node_gpus(_facts(rd.node(host) / "facts.json"))  # the verdict is judged for the node's GPU
    results = collect_node(folder, names, recipe.name, recipe.benchmark, runs[1], gpu=gpu, gpus=gpus)
    if results:
        RunWriter(rd).node_smoke(host, results)
