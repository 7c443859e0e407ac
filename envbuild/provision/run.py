"""``provision(opts)``: the phases of a run in order (see the package docstring)."""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable

from envbuild import rundir
from envbuild.bundle import offline as bundle_offline
from envbuild.connect.local import stop_all
from envbuild.connect.nodes import Node, connection_vars
from envbuild.execute import ansible as ansible_exec
from envbuild.execute import prefixlock
from envbuild.execute.events import Event, EventSink
from envbuild.facts.python import ANSIBLE_TARGET_PYTHON, ansible_python
from envbuild.interrupt import Interrupted, StopRequest
from envbuild.lock.serialize import lock_digest
from envbuild.plan.build import verdict_summary
from envbuild.plan.enter import enter_command
from envbuild.plan.model import Plan
from envbuild.plan.resolve import check_facts, default_backend
from envbuild.provision.early import Early
from envbuild.provision.lockfile import take_lock
from envbuild.provision.noop import nothing_to_do, probe_nodes
from envbuild.provision.options import ProvisionOptions, ProvisionOutcome, load, plan_options, selection
from envbuild.provision.playbook import run_playbook
from envbuild.provision import shared
from envbuild.provision.replan import plan_nodes
from envbuild.provision.results import NodeResults, exit_code, finish, record_stopped
from envbuild.record import RunWriter, create_run, read_run_info
from envbuild.render.ansible import render


def provision(opts: ProvisionOptions, *, echo: Callable[[str], None] | None = None) -> ProvisionOutcome:
    """Provision every node; see the package docstring. ``echo`` prints progress lines."""
    say = echo or (lambda _m: None)
    phases = Phases("bundle")  # what the run is doing, until Ansible records its own end (run_playbook)
    bundle_offline.prepare(opts)  # --bundle: verified whole before any node is read (exit 2)
    phases.enter("facts")
    early = Early(opts)  # facts and a speculative probe of every node, read while we load
    opened = _Opened(echo=say)  # the run's folder, from the moment it exists (a signal may come at any time)
    try:
        recipe, target, nodes = _open_run(opts, early, opened)
        rd = opened.rd
        sink, results = opened.events(opts), opened.node_results(early)
        RunWriter(rd).update(selection=_selection(opts, nodes))
        rd.write("recipe.json", recipe.model_dump(mode="json", by_alias=True))
        early.read_lock(recipe, target)
        gathered = early.facts()
        phases.enter("preflight")
        facts, feasible = _preflight(opts, recipe, target, nodes, gathered, rd, sink, results)
        phases.enter("lock")
        lock, lock_text = _take_lock(opts, recipe, target, early, rd, say) if feasible else (None, None)
        phases.enter("plan")
        plans = _plan(opts, recipe, target, facts, feasible, lock, rd, say)
        phases.enter("render")
        # a shared prefix: its first node installs it, the others use it (envbuild.provision.shared)
        installed_by = shared.users(feasible, plans, shared=target.shared_prefix)
        installers = [n for n in feasible if n.name not in installed_by]
        rendered, job, rerun_from = _prepare_job(opts, rd, facts, installers,
                                                 {n.name: plans[n.name] for n in installers if n.name in plans})
        command = job.command()

        def outcome(status: str, code: int) -> ProvisionOutcome:
            return ProvisionOutcome(rd.path, status, code, results, command, plans)

        def finished() -> ProvisionOutcome:  # the events are complete before the report reads them
            phases.enter("finish")
            return _finished(rd, sink, results, len(nodes), plans, command)

        if opts.dry_run:  # nothing installed: status "dry-run", never runs/latest, never a verdict
            RunWriter(rd).finish("dry-run")
            return outcome("dry-run", exit_code(results))
        if not feasible:
            return finished()
        phases.enter("prefix-lock")  # one provision of a prefix at a time (envbuild.execute.prefixlock)
        prefixes = {n.name: plans[n.name].prefix for n in feasible if n.name in plans}
        # this controller's quick lock per node, then the lock on each prefix itself; a shared
        # prefix is locked on its file system alone, and waited for, through the first node of the
        # prefix. A node whose prefix cannot be locked fails alone; the run stops only when none can
        mine = [] if target.shared_prefix else [(n, prefixes[n.name]) for n in feasible if n.name in prefixes]
        with prefixlock.held(mine, rd.path.name, alone=True) as busy, \
                prefixlock.on_nodes(prefixlock.claims([n for n in feasible if n.name not in busy], prefixes,
                                                      shared=target.shared_prefix),
                                    rd.path.name, lambda host, msg: sink.emit(Event(time.time(), host, "prefix-lock",
                                                                                    "waiting", msg)),
                                    alone=True) as waited:
            lost = lock_failures(busy, waited.failed, feasible, prefixes, shared=target.shared_prefix)
            if lost:  # those nodes fail here; the playbook is written again for the others
                _fail_lost(lost, sink, results)
                feasible = [n for n in feasible if n.name not in lost]
                installed_by = {u: i for u, i in installed_by.items() if u not in lost}
                installers = [n for n in installers if n.name not in lost]
                rendered, job, rerun_from = _prepare_job(opts, rd, facts, installers,
                                                         {n.name: plans[n.name] for n in installers if n.name in plans})
                command = job.command()
            # one round trip per node: markers, effects and the observed environment; when every
            # step of every node is done and holds, Ansible does not start (envbuild.provision.noop).
            # After a wait for another run's lock, the early (speculative) probes are stale
            phases.enter("probe")
            probes = {} if any(rerun_from.values()) else \
                probe_nodes(feasible, plans) if waited else early.probes(feasible, plans)
            if probes and all(p is not None and p.nothing_to_do for p in probes.values()):
                phases.enter("finish")
                nothing_to_do(rd, sink, feasible, plans, probes, results.finish)
                return finished()
            phases.enter("ansible")
            signum = run_playbook(job, rendered, rd, sink, results, installers, plans, recipe=recipe,
                                  lock_text=lock_text, json_lines=opts.json_lines)
            if signum is not None:
                waited.abandon()  # the nodes stop this run's work before its locks go (issue 41)
                return outcome("interrupted", 128 + signum)
            if installed_by:
                phases.enter("shared-prefix")
                shared.record_users(rd, sink, [n for n in feasible if n.name in installed_by], plans,
                                    installed_by, results, results.finish)
            return finished()
    except BaseException as exc:  # an interrupt or an error before Ansible is never "running", never "ok"
        if phases.now != "ansible":  # run_playbook records its own end
            # the facts may still be read in the background (Early): stop the commands that
            # read them on the controller, so that the process exits now. Not done here: a
            # remote node's facts command runs to its end first (each probe at most
            # envbuild.facts.script.PROBE_TIMEOUT_S), as Python waits for the SSH threads
            stop_all()
            if opened.rd is not None:  # a run folder exists: it says how the run stopped
                record_stopped(opened.rd, opened.stop_events(opts), opened.node_results(early),
                               [n.name for n in early.nodes], phases.now, exc)
        raise
    finally:
        _close(opened, phases)


def _close(opened: "_Opened", phases: "Phases") -> None:
    """The run's event sink closed, and the seconds of its phases put in run.json (``phase_s``):
    the timings only, so a failure to write them never takes the place of how the run ended."""
    if opened.sink is not None:
        opened.sink.close()
    if opened.rd is not None and (opened.rd.path / "run.json").is_file():
        with contextlib.suppress(Exception):
            RunWriter(opened.rd).update(phase_s=phases.seconds())


class Phases:
    """The provision's phase now (``now``) and the seconds each took, in order (run.json's
    ``phase_s``); a phase entered twice adds up."""

    def __init__(self, first: str) -> None:
        self.now, self._since = first, time.monotonic()
        self._took: dict[str, float] = {}

    def enter(self, name: str) -> None:
        t = time.monotonic()
        self._took[self.now] = self._took.get(self.now, 0.0) + t - self._since
        self.now, self._since = name, t

    def seconds(self) -> dict[str, float]:
        """Every phase so far, the one now up to this moment, to the millisecond."""
        took = {**self._took, self.now: self._took.get(self.now, 0.0) + time.monotonic() - self._since}
        return {k: round(v, 3) for k, v in took.items()}


@dataclass
class _Opened:
    """What provision has opened so far: the run's folder (set the moment it exists), its event
    sink and node results (each made once, on first use, by the run or by the recording of its
    stop). An interrupt at any point after the folder exists is recorded in it
    (``record_stopped``), never left "running"."""

    echo: Callable[[str], None]
    rd: rundir.RunDir | None = None
    sink: EventSink | None = None
    results: NodeResults | None = None

    def events(self, opts: ProvisionOptions) -> EventSink:
        if self.sink is None:
            assert self.rd is not None
            self.sink = EventSink(self.rd.events, json_lines=opts.json_lines, echo=self.echo)
        return self.sink

    def stop_events(self, opts: ProvisionOptions) -> EventSink:
        """The sink the stop is recorded through: the run's, else (its events file cannot be
        opened) one that only shows it, so that the recording itself still happens."""
        try:
            return self.events(opts)
        except OSError:
            return EventSink(None, json_lines=opts.json_lines, echo=self.echo)

    def node_results(self, early: Early) -> NodeResults:
        if self.results is None:
            assert self.rd is not None
            self.results = NodeResults(self.rd, {n.name: n.insecure for n in early.nodes})
        return self.results


def _open_run(opts: ProvisionOptions, early: Early, opened: _Opened):
    """(recipe, target, nodes): the recipe and target loaded (the nodes' facts read meanwhile by
    ``early``) and the run's folder made, into ``opened.rd``. A signal while the folder is made
    waits until ``opened`` holds it (``StopRequest``), then stops the run, so that provision
    records the interrupt in it (the fresh-clone CI of 76450c1: a SIGINT between the folder's
    run.json and the recording left it "running"). On any failure provision's handler stops the
    facts commands still running on the controller."""
    recipe, target = load(opts, on_target=early.start)
    nodes = early.nodes
    options = {k: v for k, v in asdict(opts).items() if k not in ("argv", "target", "recipe")}
    with StopRequest() as stop:
        opened.rd = create_run(recipe.name, target.name, argv=opts.argv, hosts=[n.name for n in nodes],
                               options=options).rd
    if stop.signum is not None:
        raise Interrupted(stop.signum)
    return recipe, target, nodes


def _selection(opts: ProvisionOptions, nodes: list[Node]):
    """How the run reaches its nodes, as run.json records it (for verify and launch --submit):
    the options' selection; a local target's nodes are the controller."""
    chosen = selection(opts)
    if not chosen.given and all(n.is_local for n in nodes):  # a local target: the controller
        chosen = chosen.model_copy(update={"local": True})
    return chosen.record()


def _take_lock(opts: ProvisionOptions, recipe, target, early: Early, rd: rundir.RunDir,
               say: Callable[[str], None]):
    """(lock, its text): the run's lock (``take_lock``), its text kept in the run folder and its
    path and digest recorded."""
    lock, lock_file, lock_text = take_lock(opts, recipe, target, say, found=early.lock(recipe, target))
    if lock_text:
        rd.write("lock.lock", lock_text)
    RunWriter(rd).update(lock_path=lock_file, lock_digest=lock_digest(lock) if lock is not None else None)
    return lock, lock_text


def _plan(opts: ProvisionOptions, recipe, target, facts: dict, feasible: list[Node], lock, rd: rundir.RunDir,
          say: Callable[[str], None]) -> dict[str, Plan]:
    """{node: plan} for the feasible nodes ({inventory.*} from every one's facts), each kept in
    the run folder."""
    from envbuild.plan.placeholders import inventory_values  # {inventory.*} from every node's facts

    plan_opts = replace(plan_options(opts, recipe, lock),
                        inventory=inventory_values([facts[n.name] for n in feasible]))
    plans = plan_nodes(opts, recipe, target, facts, feasible, lock, plan_opts, rd, say)
    for name, plan in plans.items():
        rd.write_node(name, "plan.json", plan.to_json())
    return plans


def _finished(rd: rundir.RunDir, sink: EventSink, results: NodeResults, n_nodes: int, plans: dict[str, Plan],
              command: str) -> ProvisionOutcome:
    """The outcome of a run that reached its end: its events closed first (the report reads
    them), its status, exit code and verdict, and how to enter each environment made."""
    sink.close()
    done = ProvisionOutcome(rd.path, *finish(rd, results, n_nodes), results, command, plans)
    run = read_run_info(rd.path)
    done.verdict = run.verdict
    done.verdict_notes = [r.message for r in run.verdict_reasons] + list(run.verdict_not_judged)
    done.enter = entries(plans, results)
    return done


def _fail_lost(lost: dict[str, str], sink: EventSink, results: NodeResults) -> None:
    """The nodes whose prefix could not be locked (``lock_failures``) fail at the prefix lock."""
    for name, why in lost.items():
        sink.emit(Event(time.time(), name, "prefix-lock", "failed", why))
        results.finish(name, "failed", failed_step="prefix-lock", log_tail=why)


def lock_failures(busy: dict, failed: list, nodes: list[Node], prefixes: dict[str, str], *,
                  shared: bool) -> dict[str, str]:
    """``{node: why}`` of the nodes whose prefix could not be locked: held on this controller
    (``busy``: {node: error}), or a claim on the node refused (``failed``: [(claim, error)]; a
    shared prefix's claim fails every node of that prefix). Pure."""
    def why(exc) -> str:
        return f"{exc}" + (f" ({exc.hint})" if exc.hint else "")

    def where(name: str) -> str:
        return prefixes[name].rstrip("/") or "/"

    out = {name: why(exc) for name, exc in busy.items()}
    for claim, exc in failed:
        for n in nodes:
            if n.name == claim.node.name or (shared and n.name in prefixes and claim.node.name in prefixes
                                              and where(n.name) == where(claim.node.name)):
                out.setdefault(n.name, why(exc))
    return out


def entries(plans: dict[str, Plan], results) -> dict[str, str]:
    """``{node: how to enter its environment}`` for each node whose provision finished ok."""
    out = {}
    for name, plan in plans.items():
        command = enter_command(plan) if results.get(name, {}).get("status") == "ok" else None
        if command:
            out[name] = command
    return out


def _preflight(opts: ProvisionOptions, recipe, target, nodes: list[Node], gathered: dict, rd: rundir.RunDir,
               sink: EventSink, results: NodeResults) -> tuple[dict, list[Node]]:
    """({node: facts}, the nodes preflight finds feasible): each node's facts recorded (an
    unreachable node stops here) and checked against the recipe before anything is installed."""
    live: list[Node] = []
    facts = {}
    for node in nodes:
        got = gathered[node.name]
        if isinstance(got, Exception):
            msg = str(got)
            sink.emit(Event(time.time(), node.name, None, "unreachable", msg))
            rd.write_node(node.name, "log.txt", msg + "\n")
            results.finish(node.name, "unreachable", log_tail=msg)
            continue
        facts[node.name] = got
        rd.write_node(node.name, "facts.json", got.model_dump(mode="json", by_alias=True))
        live.append(node)

    feasible: list[Node] = []
    for node in live:
        facts[node.name], verdict = check_facts(recipe, target, facts[node.name],
                                                backend=default_backend(recipe, opts.backend), smoke=opts.smoke)
        rd.write_node(node.name, "preflight.json", verdict.model_dump(mode="json"))
        if verdict.feasible and node.python is None and not node.is_local:
            # Ansible's own discovery takes the first python3.N on the login PATH (a pyenv shim
            # fails every module): the node's Python comes from its facts instead
            chosen = ansible_python(facts[node.name].pythons, recipe.python)
            if chosen is None:
                found = ", ".join(f"{p.path} ({p.version})" for p in facts[node.name].pythons) or "none"
                msg = (f"no Python {'.'.join(map(str, ANSIBLE_TARGET_PYTHON))} or newer for Ansible's modules "
                       f"on the node (found: {found}); name one with ansible_python_interpreter in an "
                       "inventory (--inventory)")
                sink.emit(Event(time.time(), node.name, "preflight", "failed", f"refused: {msg}"))
                results.finish(node.name, "refused", failed_step="preflight", log_tail=msg)
                continue
            node = replace(node, python=chosen.path)
            sink.emit(Event(time.time(), node.name, "preflight", "ok",
                            f"Ansible's modules run with {chosen.path} ({chosen.version}), from the node's facts"))
        if verdict.feasible:
            feasible.append(node)
        else:
            msg = verdict_summary(verdict).summary
            sink.emit(Event(time.time(), node.name, "preflight", "failed", f"refused: {msg}"))
            results.finish(node.name, "refused", failed_step="preflight",
                           log_tail=verdict.model_dump_json()[-2000:])
    return facts, feasible


def _prepare_job(opts: ProvisionOptions, rd: rundir.RunDir, facts: dict, nodes: list[Node],
                 plans: dict[str, Plan]):
    """(rendered playbook inputs, the prepared ansible-runner job, {node: step to run again from})."""
    from envbuild.bundle.fleet import wheel_builders  # each extension built on one node per kind

    cache_dir = str(rundir.envbuild_home() / "cache" / "wheels")
    bundle_offline.record(opts, rd, cache_dir)  # run.json: offline, the bundle's digest
    connections = {}
    for node in nodes:
        connections[node.name] = connection_vars(node)
        if node.is_local:  # the local node keeps Ansible's remote temp inside the run folder
            connections[node.name]["ansible_remote_tmp"] = str(rd.ansible / "home" / "remote")
    node_paths = {n.name: (facts[n.name].path or n.node_path) for n in nodes}
    rendered = render(plans, connections, node_paths, run_dir=str(rd.path), cache_dir=cache_dir)
    rendered.extravars["provision_wheel_builders"] = builders = wheel_builders(plans)
    for key in builders:  # a marker left by a failed build would not make the others wait
        if not any((Path(cache_dir) / key).glob("*.whl")):
            (Path(cache_dir) / key / ".built").unlink(missing_ok=True)
    if opts.fanout:  # the fleet's archive down a tree of the nodes (run.json's fleet.tree says how)
        from envbuild.provision.stagetree import stage_vars, summary

        tree = stage_vars(plans, nodes, opts.fanout, opts.node_identity)
        for name, data in tree.items():
            rendered.inventory["all"]["hosts"][name]["provision_stage"] = data
        fleet = read_run_info(rd.path).fleet
        if fleet is not None and tree:
            RunWriter(rd).update(fleet={**fleet.model_dump(mode="json"), "tree": summary(tree, opts.fanout)})
    rerun_from = {n: (p.steps[0].id if opts.force and p.steps else opts.from_step) for n, p in plans.items()}
    for name, sid in rerun_from.items():
        if sid:  # the playbook's envbuild_state runs every step again from this one
            rendered.inventory["all"]["hosts"][name]["provision_from_step"] = sid
    job = ansible_exec.prepare(rd.ansible, rendered, forks=len(nodes), insecure=opts.insecure)
    return rendered, job, rerun_from
