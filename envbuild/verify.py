"""envbuild verify: observe live environments again and compare them with a run's lock and plan.

The expected state comes from the run directory (lock.lock, nodes/<node>/plan.json; the
recorded nodes/<node>/observed.json is the baseline for built .so hashes). The observe script
runs with each environment's own python, over Fabric (SSH) or locally. Nothing is changed.

Exit codes: 0 every node clean, 1 drift on some node (wins: it is a definite finding),
3 a node could not be observed (unreachable, environment python gone).
"""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from envbuild.errors import EnvironmentProblem, InputError
from envbuild.execute.nodes import Node
from envbuild.observe import (Drift, Observed, compare_expected, expected_state, observe_args,
                              observe_command, parse_observed, read_lock)
from envbuild.report.collect import load_json
from envbuild.report.fingerprint import node_fingerprint

TIMEOUT_S = 300


@dataclass
class NodeVerdict:
    """The outcome for one node: clean, drift, or unreachable (could not observe)."""

    node: str
    status: str  # clean | drift | unreachable
    drift: list[Drift] = field(default_factory=list)
    message: str = ""
    fingerprint: str | None = None

    def to_dict(self) -> dict:
        return {"node": self.node, "status": self.status, "message": self.message,
                "fingerprint": self.fingerprint, "drift": [d.model_dump() for d in self.drift]}


def envbuild_home() -> Path:
    return Path(os.environ.get("ENVBUILD_HOME") or Path.home() / ".envbuild")


def resolve_run(run: str | Path | None, target: str | None = None) -> Path:
    """The run directory: ``run`` itself, else the newest run for ``target``, else runs/latest."""
    runs = envbuild_home() / "runs"
    if run is not None:
        path = Path(run)
    elif target:
        matches = sorted(p for p in runs.glob(f"*-{target}") if p.is_dir() and not p.is_symlink())
        path = matches[-1] if matches else runs / "latest"
    else:
        path = runs / "latest"
    if not (path / "run.json").exists():
        raise InputError(f"no run directory at {path}",
                         hint="provision first (`envbuild provision ...`), or pass --run RUN_DIR / set ENVBUILD_HOME")
    return path.resolve()


def _node_dir(run_dir: Path, node: Node) -> Path:
    nodes = sorted(p for p in (run_dir / "nodes").glob("*") if p.is_dir())
    for cand in (node.name, node.host):
        if (run_dir / "nodes" / cand).is_dir():
            return run_dir / "nodes" / cand
    if len(nodes) == 1 and node.is_local:
        return nodes[0]
    raise InputError(f"node {node.name} is not part of run {run_dir.name}",
                     hint=f"the run has nodes: {', '.join(p.name for p in nodes) or 'none'}")


def run_observe(node: Node, command: str, timeout: int = TIMEOUT_S) -> tuple[int, str, str]:
    """Run the observe command on ``node``: (rc, stdout, stderr). Unreachable -> EnvironmentProblem."""
    if node.is_local:
        p = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    from fabric import Connection

    kwargs = {"key_filename": node.identity_file} if node.identity_file else {}
    try:
        with Connection(node.host, user=node.user, port=node.port, connect_timeout=15,
                        connect_kwargs=kwargs) as conn:
            r = conn.run(command, hide=True, warn=True, timeout=timeout, in_stream=False)
            return r.exited, r.stdout, r.stderr
    except Exception as exc:  # paramiko/socket errors all mean: could not reach it
        raise EnvironmentProblem(f"{node.name}: unreachable: {type(exc).__name__}: {exc}",
                                 hint="check the host, port, user and key (ssh to it by hand)") from None


def verify_node(run_dir: Path, node: Node, lock: dict | None) -> NodeVerdict:
    """Observe one node and compare it with what the run expects."""
    node_dir = _node_dir(run_dir, node)
    plan = load_json(node_dir / "plan.json")
    if plan is None:
        return NodeVerdict(node.name, "unreachable", message=f"no plan.json for {node_dir.name} in the run")
    exp = expected_state(lock, plan)
    baseline_data = load_json(node_dir / "observed.json")
    baseline = Observed.model_validate(baseline_data) if baseline_data else None
    cmd = observe_command(exp.python or "python3", observe_args(exp))
    try:
        rc, out, err = run_observe(node, cmd)
    except EnvironmentProblem as exc:
        return NodeVerdict(node.name, "unreachable", message=exc.message)
    except subprocess.TimeoutExpired:
        return NodeVerdict(node.name, "unreachable", message=f"observe timed out after {TIMEOUT_S} s")
    if rc != 0:
        why = (err.strip().splitlines() or [f"rc {rc}"])[-1]
        return NodeVerdict(node.name, "unreachable", message=f"observe failed with {exp.python}: {why}")
    try:
        obs = parse_observed(out, node.name)
    except EnvironmentProblem as exc:
        return NodeVerdict(node.name, "unreachable", message=exc.message)
    drift = [d.model_copy(update={"host": node.name}) for d in compare_expected(exp, obs, baseline)]
    run = load_json(run_dir / "run.json") or {}
    return NodeVerdict(node.name, "drift" if drift else "clean", drift,
                       fingerprint=node_fingerprint(obs, run.get("lock_digest")))


def verify(run_dir: Path, nodes: list[Node]) -> list[NodeVerdict]:
    """Verify every node in parallel, results in the order given."""
    lock_file = run_dir / "lock.lock"
    lock = read_lock(lock_file) if lock_file.exists() else None
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(nodes)))) as pool:
        return list(pool.map(lambda n: verify_node(run_dir, n, lock), nodes))


def exit_code(results: list[NodeVerdict]) -> int:
    """1 if any drift, else 3 if any node could not be observed, else 0."""
    if any(r.status == "drift" for r in results):
        return 1
    if any(r.status == "unreachable" for r in results):
        return 3
    return 0
