"""Provision: facts -> preflight -> lock -> plan -> run directory -> ansible -> results.

``provision(ProvisionOptions(...))`` is the library call behind ``envbuild provision``. Every
node is handled on its own: an unreachable node or one refused by preflight is recorded and
the others go on; a node that fails a step does not stop the others.

Exit codes: 0 every node ok; 4 a node failed a step; 3 a node unreachable; 1 a node refused by
preflight; 2 bad input (raised as InputError before anything runs).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from envbuild import rundir
from envbuild.errors import EnvironmentProblem, InputError
from envbuild.execute import ansible as ansible_exec
from envbuild.execute import ssh
from envbuild.execute.events import Event, EventSink, StepTracker
from envbuild.execute.nodes import Node, load_inventory, local_node, parse_hosts
from envbuild.plan.model import Plan
from envbuild.render.ansible import render

SMOKE_DIR = Path(__file__).parent / "smoke"
EXIT = {"failed": 4, "unreachable": 3, "refused": 1}


@dataclass
class ProvisionOptions:
    """What ``envbuild provision`` was asked to do."""

    target: str
    recipe: str | None = None
    hosts: str | None = None
    inventory: str | None = None
    backend: str | None = None
    prefix: str | None = None
    dry_run: bool = False
    git_mirror: str | None = None
    wheelhouse: str | None = None
    lock: str | None = None
    smoke: bool = True
    json_lines: bool = False
    insecure: bool = False  # no host key checking (test nodes only)
    identity_file: str | None = None
    conda_channel: str | None = None  # --backend conda: channel URL or local channel folder
    conda_packages: list[str] = field(default_factory=list)  # --backend conda: conda specs
    argv: list[str] = field(default_factory=list)


@dataclass
class ProvisionOutcome:
    run_dir: Path
    status: str  # ok | failed | partial
    exit_code: int
    results: dict[str, dict]
    command: str  # the ansible-playbook command line for a run by hand
    plans: dict[str, Plan]


class _NodeRunner:
    """Adapter: envbuild.facts' Runner protocol over our Node (local or Fabric)."""

    def __init__(self, node: Node):
        self.node, self.name = node, node.name

    def run(self, command: str, *, timeout: int = 300):
        from envbuild.facts.runners import Result

        return Result(*ssh.run(self.node, command, timeout=timeout))


def select_nodes(opts: ProvisionOptions, target) -> list[Node]:
    """--hosts, --inventory, or the controller itself for a local target."""
    if opts.hosts and opts.inventory:
        raise InputError("give --hosts or --inventory, not both")
    if opts.hosts:
        return parse_hosts(opts.hosts, identity_file=opts.identity_file, insecure=opts.insecure)
    if opts.inventory:
        return load_inventory(opts.inventory, insecure=opts.insecure)
    if target.name == "local" or target.from_facts:
        return [local_node()]
    raise InputError(f"target {target.name!r} needs nodes",
                     hint="pass --hosts user@h1,h2 or --inventory FILE (or use --target local)")


def _load(opts: ProvisionOptions):
    from envbuild.recipes import default_recipe, load_recipe
    from envbuild.targets import load_target

    recipe = load_recipe(opts.recipe) if opts.recipe else default_recipe()
    target = load_target(opts.target)
    if opts.backend not in (None, "venv", "conda"):
        raise InputError(f"unknown backend {opts.backend!r}", hint="use --backend venv or --backend conda")
    for name, value in (("--wheelhouse", opts.wheelhouse), ("--git-mirror", opts.git_mirror)):
        if value and not Path(value).is_dir():
            raise InputError(f"{name} {value}: no such folder", hint=f"pass an existing folder to {name}")
    channel = opts.conda_channel
    if channel and "://" not in channel and "/" in channel and not Path(channel).is_dir():
        raise InputError(f"conda channel {channel}: no such folder",
                         hint="give a channel folder (with noarch/repodata.json), a URL or a channel name")
    if (channel or opts.conda_packages) and (opts.backend or recipe.environment.kind) != "conda":
        raise InputError("conda channel/packages given but the environment is not conda",
                         hint="add --backend conda")
    if opts.lock and not Path(opts.lock).is_file():
        raise InputError(f"--lock {opts.lock}: no such file", hint="envbuild lock writes lockfiles/<recipe>/<target>.lock")
    return recipe, target


def take_lock(opts: ProvisionOptions, recipe, target, say: Callable[[str], None]):
    """(lock, path, text): --lock, else lockfiles/<recipe>/<target>.lock, else lock now."""
    try:
        from envbuild.lock.make import lock_path, make_lock
        from envbuild.lock.serialize import dump_lock, read_lock, regenerate_command
    except ImportError:  # lock package not installed in this checkout
        return None, None, None
    path = Path(opts.lock) if opts.lock else lock_path(recipe.name, target.name)
    if path.is_file():
        return read_lock(path), str(path), path.read_text()
    say(f"no lockfile at {path}: locking {recipe.name} for {target.name} now")
    lock = make_lock(recipe, target, git_mirror=Path(opts.git_mirror) if opts.git_mirror else None,
                     wheelhouse=Path(opts.wheelhouse) if opts.wheelhouse else None, progress=say)
    return lock, None, dump_lock(lock, regenerate_command(recipe.name, target.name))


def preflight(recipe, target, facts) -> dict:
    """The compatibility verdict as JSON ({feasible, summary, ...}); feasible when no checker exists."""
    try:
        from envbuild.compat.check import preflight as check
    except ImportError:
        return {"feasible": True, "summary": "no compatibility checker installed", "violations": []}
    verdict = check(recipe, target, facts)
    data = verdict.model_dump(mode="json") if hasattr(verdict, "model_dump") else dict(vars(verdict))
    data["feasible"] = bool(verdict.feasible)
    errors = [v for v in data.get("violations") or [] if v.get("severity") == "error"]
    data["summary"] = "; ".join(f"{v.get('rule')}: {v.get('message')}" for v in errors) or "feasible"
    return data


def refine(target, facts):
    """Live facts completed by the target profile (envbuild.facts.profile), when available."""
    try:
        from envbuild.facts.profile import refine as _refine
    except ImportError:
        return facts
    return _refine(target, facts)


def node_home(node: Node) -> str:
    rc, out, err = ssh.run(node, 'printf "%s" "$HOME"', timeout=30)
    if rc != 0 or not out.startswith("/"):
        raise EnvironmentProblem(f"{node.name}: cannot read $HOME: {err.strip()}")
    return out


def provision(opts: ProvisionOptions, *, echo: Callable[[str], None] | None = None) -> ProvisionOutcome:
    """Provision every node; see the module docstring. ``echo`` prints progress lines."""
    from envbuild.facts.gather import gather
    from envbuild.plan.build import PlanOptions, build_plan, default_prefix

    say = echo or (lambda _m: None)
    recipe, target = _load(opts)
    nodes = select_nodes(opts, target)
    options = {k: v for k, v in asdict(opts).items() if k not in ("argv", "target", "recipe")}
    rd = rundir.create(recipe.name, target.name, argv=opts.argv, hosts=[n.name for n in nodes],
                       options=options)
    rd.write("recipe.json", recipe.model_dump(mode="json", by_alias=True))
    sink = EventSink(rd.events, json_lines=opts.json_lines, echo=say)
    results: dict[str, dict] = {}

    def finish_node(name: str, status: str, **extra) -> None:
        res = {"status": status, "failed_step": None, "command": None, "rc": None, "log_tail": "",
               "changed": [], "skipped": [], "duration_s": 0.0, **extra}
        results[name] = res
        rd.write_node(name, "result.json", res)

    # facts and HOME, in parallel; unreachable nodes stop here
    def facts_of(node: Node):
        return gather(_NodeRunner(node), host=node.name, skip=("pip_list",)), node_home(node)

    gathered = ssh.each(nodes, facts_of)
    live: list[Node] = []
    facts = {}
    for node in nodes:
        got = gathered[node.name]
        if isinstance(got, Exception):
            msg = str(got)
            sink.emit(Event(time.time(), node.name, None, "unreachable", msg))
            rd.write_node(node.name, "log.txt", msg + "\n")
            finish_node(node.name, "unreachable", log_tail=msg)
            continue
        got = (refine(target, got[0]), got[1])
        facts[node.name] = got
        rd.write_node(node.name, "facts.json", got[0].model_dump(mode="json", by_alias=True))
        live.append(node)

    # preflight each node before anything is installed
    feasible: list[Node] = []
    verdicts: dict[str, dict] = {}
    for node in live:
        verdict = preflight(recipe, target, facts[node.name][0])
        verdicts[node.name] = verdict
        rd.write_node(node.name, "preflight.json", verdict)
        if verdict["feasible"]:
            feasible.append(node)
        else:
            msg = verdict.get("summary") or "infeasible"
            sink.emit(Event(time.time(), node.name, "preflight", "failed", f"refused: {msg}"))
            finish_node(node.name, "refused", failed_step="preflight", log_tail=json.dumps(verdict)[-2000:])

    lock = lock_file = lock_text = None
    if feasible:
        lock, lock_file, lock_text = take_lock(opts, recipe, target, say)
        if lock_text:
            rd.write("lock.lock", lock_text)
        rd.update_run(lock_path=lock_file, lock_digest=getattr(lock, "digest", None))

    plans: dict[str, Plan] = {}
    for node in feasible:
        home = facts[node.name][1]
        prefix = opts.prefix or default_prefix(recipe, target)
        prefix = home + prefix[1:] if prefix.startswith("~") else prefix
        verdict = {k: verdicts[node.name].get(k) for k in ("feasible", "summary") if k in verdicts[node.name]}
        plan = build_plan(recipe, target, facts[node.name][0], lock, PlanOptions(
            prefix=prefix, backend=opts.backend, git_mirror=opts.git_mirror,
            wheelhouse=opts.wheelhouse, smoke=opts.smoke, host=node.name, verdict=verdict,
            conda_channel=opts.conda_channel, conda_packages=tuple(opts.conda_packages)))
        plans[node.name] = plan
        rd.write_node(node.name, "plan.json", plan.to_json())

    cache_dir = str(rundir.envbuild_home() / "cache" / "wheels")
    smoke_available = sorted(p.stem for p in SMOKE_DIR.glob("*.py") if not p.stem.startswith("_"))
    rendered = render(plans, feasible, run_dir=str(rd.path), cache_dir=cache_dir,
                      smoke_src=str(SMOKE_DIR), smoke_available=smoke_available)
    smoke_runs = {n.name: _smoke_runs(recipe, plans[n.name], facts[n.name][0]) for n in feasible}
    for node in feasible:
        hv = rendered.inventory["all"]["hosts"][node.name]
        hv["envbuild_smoke_runs"] = smoke_runs[node.name][0]
        if node.is_local:  # the local node keeps Ansible's remote temp inside the run folder
            hv["ansible_remote_tmp"] = str(rd.ansible / "home" / "remote")
    job = ansible_exec.prepare(rd.ansible, rendered, forks=len(feasible), insecure=opts.insecure)
    command = job.command()

    if opts.dry_run or not feasible:
        rd.update_run(finished=rundir._now(), status=_overall(results, len(nodes)) if results else "ok")
        sink.close()
        return ProvisionOutcome(rd.path, _overall(results, len(nodes)) if results else "ok",
                                _exit(results), results, command, plans)

    tracker = StepTracker()
    started = time.time()
    try:
        ansible_exec.run(job, sink, tracker)
    finally:
        sink.close()
    duration = round(time.time() - started, 2)

    for node in feasible:
        t = tracker.hosts.get(node.name)
        log = "\n".join(t.log) + "\n" if t else ""
        rd.write_node(node.name, "log.txt", log)
        if t is None:
            finish_node(node.name, "unreachable", log_tail="ansible reported nothing for this host")
            continue
        status = "unreachable" if t.unreachable else "failed" if t.failed_step else "ok"
        finish_node(node.name, status, failed_step=t.failed_step, command=t.command, rc=t.rc,
                    log_tail=(t.message + "\n" if t.message else "") + t.tail(),
                    changed=t.changed + t.ok, skipped=t.skipped,
                    duration_s=round((t.finished or time.time()) - started, 2) if t.failed_step else duration)
        if status == "ok" or t.failed_step == "smoke":  # installed either way: record what is there
            _observe(rd, node, plans[node.name], lock_text)
        if status in ("ok", "failed"):
            _merge_smoke(rd, node.name, smoke_runs[node.name], recipe)
    status = _overall(results, len(nodes))
    rd.update_run(finished=rundir._now(), status=status)
    return ProvisionOutcome(rd.path, status, _exit(results), results, command, plans)


def _observe(rd: rundir.RunDir, node: Node, plan: Plan, lock_text: str | None) -> None:
    """observed.json from the live node (envbuild.observe's node script)."""
    try:
        import yaml

        from envbuild.observe import expected_state, observe_args, observe_command, parse_observed
    except ImportError:
        return
    lock = yaml.safe_load(lock_text) if lock_text else None
    exp = expected_state(lock, plan)
    rc, out, err = ssh.run(node, observe_command(f"{plan.prefix}/bin/python", observe_args(exp)))
    if rc == 0:
        rd.write_node(node.name, "observed.json", parse_observed(out, node.name).model_dump(mode="json", by_alias=True))


def _smoke_runs(recipe, plan: Plan, facts) -> tuple[list[dict], str | None]:
    """(the smoke role's runs for this node, why the native benchmark does not run here)."""
    from envbuild.smoke.onnode import native_run, node_runs, smoke_dir

    step = next((s for s in plan.steps if s.kind == "smoke"), None)
    if step is None:
        return [], None
    bench = recipe.benchmark.model_dump(mode="json") if recipe.benchmark else None
    sources = {s.params["name"]: s.params["dest"] for s in plan.steps
               if s.kind == "git_source" and s.params.get("name") and s.params.get("dest")}
    gpus = len(getattr(facts, "gpus", None) or [])
    native = native_run(bench, gpus=gpus, sources=sources, cwd=smoke_dir(plan.prefix))
    return node_runs(plan.prefix, step.params, bench, gpus=gpus, sources=sources), native.get("skip")


def _merge_smoke(rd: rundir.RunDir, host: str, runs: tuple[list[dict], str | None], recipe) -> None:
    """nodes/<host>/smoke.json from the role's fetched outputs (nothing when smoke did not run)."""
    from envbuild.smoke.onnode import collect_node, dumps

    names = [r["name"] for r in runs[0]]
    folder = rd.node(host) / "smoke"
    if not names or not folder.is_dir():
        return
    bench = recipe.benchmark.model_dump(mode="json") if recipe.benchmark else None
    results = collect_node(folder, names, bench, runs[1])
    if results:
        rd.write_node(host, "smoke.json", dumps(results))


def _overall(results: dict[str, dict], n: int) -> str:
    ok = sum(1 for r in results.values() if r["status"] == "ok")
    return "ok" if ok == n else "failed" if ok == 0 else "partial"


def _exit(results: dict[str, dict]) -> int:
    statuses = {r["status"] for r in results.values()}
    for status in ("failed", "unreachable", "refused"):
        if status in statuses:
            return EXIT[status]
    return 0
