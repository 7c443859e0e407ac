"""envbuild verify: observe live environments again and compare them with a run's lock and plan.

The expected state comes from the run directory (lock.lock, nodes/<node>/plan.json; the
recorded nodes/<node>/observed.json is the baseline for built .so hashes). One command per node
(``envbuild.actions.nodestate``), run with each environment's own python over Fabric (SSH) or
locally, observes the environment and checks every plan step's effect as a provision does
before skipping it (``envbuild.actions.effects``): a distribution whose RECORD files are gone
or changed, a source tree with local changes, an env file edited are drift
(``effect-failed``). Files are compared by size, mtime and ctime with the manifest recorded at
install and hashed when those differ; ``deep`` hashes every file. Nothing is changed.

Exit codes: 0 every node clean, 1 drift on some node (wins: it is a definite finding),
3 a node could not be observed (unreachable, environment python gone).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from envbuild.actions.nodestate import parse_probe, plan_steps, probe_call
from envbuild.connect.runners import LocalRunner, Runner
from envbuild.errors import EnvironmentProblem, InputError
from envbuild.observe import Drift, compare_expected, expected_state, observe_args, parse_observed
from envbuild.record import UNFINISHED, NodeRecord, RunRecord, read_run_info
from envbuild.report.fingerprint import node_fingerprint
from envbuild.rundir import envbuild_home

TIMEOUT_S = 300


@dataclass
class NodeVerdict:
    """The outcome for one node: clean, drift, or unreachable (could not observe)."""

    node: str
    status: str  # clean | drift | unreachable
    drift: list[Drift] = field(default_factory=list)
    message: str = ""
    fingerprint: str | None = None
    insecure: bool = False  # observed over SSH without checking the host key (--insecure)

    def to_dict(self) -> dict:
        return {"node": self.node, "status": self.status, "message": self.message,
                "fingerprint": self.fingerprint, "insecure": self.insecure,
                "drift": [d.model_dump() for d in self.drift]}


def resolve_run(run: str | Path | None, target: str | None = None) -> Path:
    """The run directory: ``run`` itself, else the newest finished (non-dry, uninterrupted) run
    for ``target``, else runs/latest."""
    runs = envbuild_home() / "runs"
    if run is not None:
        path = Path(run)
    elif target:
        matches = sorted(p for p in [*runs.glob(f"*-{target}"), *runs.glob(f"*-{target}.*")]
                         if p.is_dir() and not p.is_symlink() and _finished(p))
        path = matches[-1] if matches else runs / "latest"
    else:
        path = runs / "latest"
    if not (path / "run.json").exists():
        raise InputError(f"no run directory at {path}",
                         hint="provision first (`envbuild provision ...`), or pass --run RUN_DIR / set ENVBUILD_HOME")
    return path.resolve()


def _finished(run_dir: Path) -> bool:
    try:
        return read_run_info(run_dir).status not in UNFINISHED
    except InputError:
        return False


def _node_record(record: RunRecord, names: list[str], only_one_ok: bool) -> NodeRecord:
    """The run's record of a node, matched by inventory name, label or host."""
    nodes = record.nodes()
    for cand in names:
        if cand and (node := record.node(cand)) is not None:
            return node
    if len(nodes) == 1 and only_one_ok:
        return nodes[0]
    raise InputError(f"node {names[0]} is not part of run {record.path.name}",
                     hint=f"the run has nodes: {', '.join(n.host for n in nodes) or 'none'}")


def runner_names(runner: Runner) -> list[str]:
    """Names under which a runner's node may appear in a run directory."""
    node = getattr(runner, "node", None)
    names = [runner.name]
    if node is not None:
        names += [node.name, node.host, f"{node.host}:{node.port or 22}"]
    return [n for n in names if n]


def verify_node(record: RunRecord, runner: Runner, *, deep: bool = False) -> NodeVerdict:
    """Observe one node (through ``runner``) and compare it with what the run ``record``
    expects; ``deep`` hashes every file of every distribution against its RECORD."""
    node = _node_record(record, runner_names(runner), isinstance(runner, LocalRunner))
    name = node.host
    plan = node.plan
    if plan is None:
        return NodeVerdict(name, "unreachable", message=f"no plan.json for {name} in the run")
    exp = expected_state(record.lock, plan)
    baseline = node.observed
    call = probe_call(exp.python or "python3", plan.prefix, plan_steps(plan), deep=deep,
                      observe=observe_args(exp))
    try:
        res = runner.run(call.command, timeout=TIMEOUT_S, stdin=call.stdin)
    except EnvironmentProblem as exc:  # unreachable, or host key unknown/changed: say what to do
        return NodeVerdict(name, "unreachable", message=exc.message + (f" (hint: {exc.hint})" if exc.hint else ""))
    finally:
        if hasattr(runner, "close"):
            runner.close()
    if res.rc != 0:
        why = (res.stderr.strip().splitlines() or [f"rc {res.rc}"])[-1]
        return NodeVerdict(name, "unreachable", message=f"observe failed with {exp.python}: {why}")
    try:
        probe = parse_probe(res.stdout, name)
        obs = parse_observed(json.dumps(probe.observed), name)
    except EnvironmentProblem as exc:
        return NodeVerdict(name, "unreachable", message=exc.message)
    drift = [d.model_copy(update={"host": name}) for d in compare_expected(exp, obs, baseline)]
    drift += effect_drift(probe.state, name)
    summary = "" if drift else (f"{len(exp.packages)} packages, {len(exp.git)} commits, {len(exp.patches)} patches, "
                                f"{len(baseline.extensions) if baseline else 0} extensions as recorded")
    return NodeVerdict(name, "drift" if drift else "clean", drift, message=summary,
                       fingerprint=node_fingerprint(obs, record.lock_digest))


def effect_drift(state: dict, host: str) -> list[Drift]:
    """An ``effect-failed`` drift row for every plan step whose effect does not hold."""
    return [Drift(kind="effect-failed", subject=sid, expected="effect holds", observed=res.get("detail"), host=host)
            for sid, res in (state.get("effects") or {}).items() if not res.get("ok")]


def verify(run_dir: Path, nodes: list[Runner], *, deep: bool = False) -> list[NodeVerdict]:
    """Verify every node (a LocalRunner or SshRunner each) in parallel, results in order.
    A verdict says ``insecure`` when its node's host key was not checked; ``deep`` hashes
    every installed file (see ``verify_node``)."""
    record = RunRecord.load(run_dir)
    record.lock, record.lock_digest, record.nodes()  # read once, before the threads

    def one(runner: Runner) -> NodeVerdict:
        verdict = verify_node(record, runner, deep=deep)
        node = getattr(runner, "node", None)
        verdict.insecure = bool(node is not None and not node.is_local and node.insecure)
        return verdict

    with ThreadPoolExecutor(max_workers=min(16, max(1, len(nodes)))) as pool:
        return list(pool.map(one, nodes))


def exit_code(results: list[NodeVerdict]) -> int:
    """1 if any drift, else 3 if any node could not be observed, else 0."""
    if any(r.status == "drift" for r in results):
        return 1
    if any(r.status == "unreachable" for r in results):
        return 3
    return 0
