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
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

from envbuild import rundir
from envbuild.errors import EnvironmentProblem, InputError
from envbuild.bundle import offline as bundle_offline
from envbuild.execute import ansible as ansible_exec
from envbuild.execute import ssh
from envbuild.execute.events import STATE_TASK, Event, EventSink, StepTracker, task_name
from envbuild.execute.nodes import Node, connection_vars, load_inventory, local_node, parse_hosts
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
    data_mirror: str | None = None  # the recipe's data files (DIR/<file>), readable on the nodes
    lock: str | None = None
    smoke: bool = True
    smoke_preset: str = "tiny"  # tiny (CPU, seconds) or 350m (a ~355M GPT on the GPU: MFU)
    json_lines: bool = False
    insecure: bool = False  # no host key checking (test nodes only)
    identity_file: str | None = None
    known_hosts: list[str] = field(default_factory=list)  # known_hosts files (default: ssh's)
    conda_channel: str | None = None  # --backend conda: channel URL or local channel folder
    conda_packages: list[str] = field(default_factory=list)  # --backend conda: conda specs
    locked: bool = False  # refuse to create a missing lock (a stale one is always refused)
    allow_unverified: list[str] = field(default_factory=list)  # packages that may lack a hash
    force: bool = False  # run every step again (markers and effects notwithstanding)
    from_step: str | None = None  # run again from this step id, and every step after it
    bundle: str | None = None  # offline: everything from this bundle (envbuild.bundle.offline)
    # a fleet (envbuild.bundle.fleet): wheels downloaded once on the controller and pushed to the
    # nodes; None: when there is more than one SSH node
    push_wheels: bool | None = None
    # --backend container (envbuild.plan.container): the image's base, and how the node's engine
    # is called: extra `build` options (--isolation chroot) and NAME=VALUE environment entries
    base: str | None = None
    engine_args: list[str] = field(default_factory=list)
    engine_env: list[str] = field(default_factory=list)
    installer: str = "auto"  # auto | pip | uv (envbuild.plan.installer)
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
    known = tuple(opts.known_hosts) or None
    if opts.hosts and opts.hosts.strip() == "local":  # the controller itself, as --target local
        return [local_node()]
    if opts.hosts:
        return parse_hosts(opts.hosts, identity_file=opts.identity_file, insecure=opts.insecure,
                           known_hosts=known)
    if opts.inventory:
        return load_inventory(opts.inventory, insecure=opts.insecure, known_hosts=known)
    if target.name == "local" or target.from_facts:
        return [local_node()]
    raise InputError(f"target {target.name!r} needs nodes",
                     hint="pass --hosts user@h1,h2 or --inventory FILE (or use --target local)")


def _load(opts: ProvisionOptions, on_target: Callable[[object], None] | None = None):
    """(recipe, target) after checking the options; ``on_target(target)`` is called once the
    options, the target and a named recipe are known good, before the default recipe is read
    (provision starts reading the nodes there, see ``_Early``)."""
    from envbuild.recipes import default_recipe, load_recipe
    from envbuild.targets import load_target

    recipe = load_recipe(opts.recipe) if opts.recipe else None
    target = load_target(opts.target)
    if opts.backend not in (None, "venv", "conda", "container"):
        raise InputError(f"unknown backend {opts.backend!r}", hint="use --backend venv, conda or container")
    _check_engine_options(opts)
    for name, value in (("--wheelhouse", opts.wheelhouse), ("--git-mirror", opts.git_mirror)):
        if value and not Path(value).is_dir():
            raise InputError(f"{name} {value}: no such folder", hint=f"pass an existing folder to {name}")
    channel = opts.conda_channel
    if channel and "://" not in channel and "/" in channel and not Path(channel).is_dir():
        raise InputError(f"conda channel {channel}: no such folder",
                         hint="give a channel folder (with noarch/repodata.json), a URL or a channel name")
    if opts.force and opts.from_step:
        raise InputError("give --force or --from-step, not both",
                         hint="--force runs every step again; --from-step ID runs again from step ID")
    if opts.prefix and opts.prefix.replace("{node}", "").count("{") + opts.prefix.replace("{node}", "").count("}"):
        raise InputError(f"--prefix {opts.prefix}: the only placeholder is {{node}}",
                         hint="e.g. --prefix /scratch/envs/{node} gives each node its own folder")
    if opts.prefix and not opts.prefix.startswith(("/", "~/")):
        raise InputError(f"--prefix {opts.prefix}: not an absolute path",
                         hint="give an absolute path, or one under the node's home as ~/...")
    if opts.lock and not Path(opts.lock).is_file():
        raise InputError(f"--lock {opts.lock}: no such file", hint="envbuild lock writes LOCKDIR/<recipe>/<target>.lock (--lockdir, $ENVBUILD_LOCKDIR)")
    if recipe is not None:
        _check_conda(opts, recipe)
    if on_target is not None:
        on_target(target)
    if recipe is None:
        recipe = default_recipe()
        _check_conda(opts, recipe)
    return recipe, target


def _check_conda(opts: ProvisionOptions, recipe) -> None:
    if (opts.conda_channel or opts.conda_packages) and (opts.backend or recipe.environment.kind) != "conda":
        raise InputError("conda channel/packages given but the environment is not conda",
                         hint="add --backend conda")


def existing_lock(opts: ProvisionOptions, recipe, target):
    """(lock, path, text) of --lock, else the lockdir's or the shipped lock
    (``envbuild.inputs.lock_source``); None when there is none. A stale lock is refused (CheckFailed)."""
    from envbuild.inputs import find_lock, lock_source

    lock = find_lock(recipe, target, opts.lock)
    if lock is None:
        return None
    path = lock_source(recipe, target, opts.lock)
    return lock, str(path), path.read_text()


def take_lock(opts: ProvisionOptions, recipe, target, say: Callable[[str], None], found=None):
    """(lock, path, text): --lock, else the lockdir's or the shipped lock, else lock now.
    ``found`` is ``existing_lock``'s answer when the caller already asked.

    A lock that no longer satisfies the recipe is refused (CheckFailed, exit 1, with the
    command that re-locks), as ``plan`` refuses it; with ``--locked`` a missing lock is too,
    and so is a shipped recipe's missing lock (its lock ships with it: resolving it anew over
    the network would install something else than what was tested). Only a recipe of one's own
    without a lock is locked now, announced (README "Lockfiles").
    """
    from envbuild.errors import CheckFailed
    from envbuild.inputs import lock_source
    from envbuild.lock.make import LOCKDIR_ENV, SHIPPED_LOCKDIR, make_lock
    from envbuild.lock.serialize import dump_lock, regenerate_command
    from envbuild.recipes import is_shipped

    found = found if found is not None else existing_lock(opts, recipe, target)
    if found is not None:
        return found
    path = lock_source(recipe, target, opts.lock)
    if is_shipped(recipe):
        raise CheckFailed(f"no lockfile for the shipped recipe {recipe.name} on {target.name}: "
                          f"not in ${LOCKDIR_ENV} nor among the shipped locks ({SHIPPED_LOCKDIR})",
                          hint="the installation lacks envbuild/lockfiles (reinstall envbuild), or "
                               f"lock it yourself: {regenerate_command(recipe.name, target.name)} "
                               "--lockdir DIR, then ENVBUILD_LOCKDIR=DIR or --lock FILE")
    if opts.locked:
        raise CheckFailed(f"no lockfile at {path} and --locked was given",
                          hint=f"create it first: {regenerate_command(recipe.name, target.name)}")
    say(f"no lockfile at {path}: locking {recipe.name} for {target.name} now")
    lock = make_lock(recipe, target, git_mirror=Path(opts.git_mirror) if opts.git_mirror else None,
                     wheelhouse=Path(opts.wheelhouse) if opts.wheelhouse else None, progress=say)
    return lock, None, dump_lock(lock, regenerate_command(recipe.name, target.name))


def refuse_unreachable_indexes(nodes: list[Node], plans: dict[str, Plan]) -> dict[str, dict[str, str]]:
    """EnvironmentProblem (exit 3) naming each index URL a node cannot reach and ``--wheelhouse``,
    instead of pip's retries minutes later (``envbuild.facts.reach``: one probe per node that
    installs from an index other than PyPI; none when the wheelhouse or bundle serves it all)."""
    from envbuild.facts import reach

    problems: list[str] = []
    local: dict[str, dict[str, str]] = {}  # node -> {url: find-links folder that serves it}
    for node in nodes:
        urls = reach.remote_indexes(plans[node.name])
        if urls:
            wants = {u: reach.wheels_from(plans[node.name], u) for u in urls}
            rc, out, err = ssh.run(node, reach.probe_command(urls, node.python or "python3", wants),
                                   timeout=reach.TIMEOUT_S * len(urls) + 30)
            problems += [f"{node.name} cannot reach {url} ({why})"
                         for url, why in reach.unreachable(urls, rc, out, err).items()]
            if served := reach.local_dirs(out):
                local[node.name] = served
    if problems:
        raise EnvironmentProblem("package index unreachable, nothing installed:\n  - " + "\n  - ".join(problems),
                                 hint="give the wheels another way: --wheelhouse DIR (a folder of wheels on the "
                                      "node, e.g. the CPU torch wheel), or --bundle FILE from `envbuild bundle`")
    return local


def refuse_unverified(plan: Plan, allowed: list[str]) -> None:
    """A package without a hash in the lock installs only when named by --allow-unverified."""
    from envbuild.errors import CheckFailed

    ok = {a.lower() for a in allowed}
    missing = sorted({n for s in plan.steps if s.kind in ("pip_install", "pip_tooling")
                      for n in s.params.unverified if n.lower() not in ok})
    if missing:
        raise CheckFailed(f"{len(missing)} package(s) have no verified hash in the lock: "
                          f"{', '.join(missing)}",
                          hint="re-lock with a reachable index or wheelhouse, or accept them "
                               "one by one with --allow-unverified NAME")


def plan_options(opts: ProvisionOptions, recipe, lock: object | None = None) -> "PlanOptions":
    """The planner's options from provision's (shared with ``envbuild plan``)."""
    from envbuild.plan.build import PlanOptions
    from envbuild.plan.resolve import fetch_urls

    from envbuild.plan.resolve import default_backend

    return PlanOptions(prefix=opts.prefix, backend=default_backend(recipe, opts.backend), git_mirror=opts.git_mirror,
                       wheelhouse=opts.wheelhouse, smoke=opts.smoke, smoke_preset=opts.smoke_preset,
                       conda_channel=opts.conda_channel, conda_packages=tuple(opts.conda_packages),
                       fetch_urls=fetch_urls(recipe, opts.git_mirror, lock),
                       allow_unverified=tuple(opts.allow_unverified),
                       bundle=bundle_offline.plan_bundle(opts), data_mirror=opts.data_mirror,
                       installer=opts.installer, uv=controller_uv(opts.installer),
                       **_container_options(opts, recipe))


def controller_uv(installer: str):
    """The controller's uv (``envbuild.facts.uvbin``) the planner may push; None for pip."""
    if installer == "pip":
        return None
    from envbuild.facts.uvbin import controller_uv as found

    return found()[1]


def _check_engine_options(opts: ProvisionOptions) -> None:
    """--base, --engine-arg and --engine-env only with the container backend (the container
    recipes' default); --engine-env entries are NAME=VALUE."""
    if (opts.base or opts.engine_args or opts.engine_env) and opts.backend not in (None, "container"):
        raise InputError(f"--base/--engine-arg/--engine-env given with --backend {opts.backend}",
                         hint="they build the image on the node: use --backend container")
    for entry in opts.engine_env:
        name = entry.partition("=")[0]
        if "=" not in entry or not name.replace("_", "a").isalnum() or name[:1].isdigit():
            raise InputError(f"--engine-env {entry!r}: not NAME=VALUE",
                             hint="e.g. --engine-env CONTAINERS_STORAGE_CONF=/srv/podman/storage.conf")
        from envbuild.redact import is_secret_name

        if is_secret_name(name):  # the plan (and plan.json in the run) carries these values
            raise InputError(f"--engine-env {name}: a secret-named variable would be written into the plan",
                             hint="set it in the node's own environment (or the engine's config) instead")


def _container_options(opts: ProvisionOptions, recipe) -> dict:
    """PlanOptions fields of the container backend (the default of a container recipe)."""
    from envbuild.plan.resolve import default_backend

    backend = default_backend(recipe, opts.backend)
    if backend != "container":
        if opts.base or opts.engine_args or opts.engine_env:
            raise InputError(f"--base/--engine-arg/--engine-env: {recipe.name}'s environment is a "
                             f"{recipe.environment.kind}, not an image", hint="add --backend container")
        return {}
    return {"base": opts.base, "engine_args": tuple(opts.engine_args),
            "engine_env": dict(e.split("=", 1) for e in opts.engine_env)}


def provision(opts: ProvisionOptions, *, echo: Callable[[str], None] | None = None) -> ProvisionOutcome:
    """Provision every node; see the module docstring. ``echo`` prints progress lines."""
    from envbuild.plan.build import verdict_summary
    from envbuild.plan.resolve import check_facts, default_backend, resolve

    say = echo or (lambda _m: None)
    bundle_offline.prepare(opts)  # --bundle: verified whole before any node is read (exit 2)
    early = _Early(opts)  # facts and a speculative probe of every node, read while we load
    recipe, target = _load(opts, on_target=early.start)
    nodes = early.nodes
    options = {k: v for k, v in asdict(opts).items() if k not in ("argv", "target", "recipe")}
    rd = rundir.create(recipe.name, target.name, argv=opts.argv, hosts=[n.name for n in nodes],
                       options=options)
    rd.write("recipe.json", recipe.model_dump(mode="json", by_alias=True))
    sink = EventSink(rd.events, json_lines=opts.json_lines, echo=say)
    results: dict[str, dict] = {}
    early.read_lock(recipe, target)

    insecure = {n.name: n.insecure for n in nodes}  # host keys not checked (recorded, reported)

    def finish_node(name: str, status: str, **extra) -> None:
        res = {"status": status, "failed_step": None, "command": None, "rc": None, "log_tail": "",
               "changed": [], "skipped": [], "duration_s": 0.0,
               "insecure": insecure.get(name, False), **extra}
        results[name] = res
        rd.write_node(name, "result.json", res)

    # facts (with $HOME and $PATH), in parallel (started by _Early); unreachable nodes stop here
    gathered = early.facts()
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
        facts[node.name] = got
        rd.write_node(node.name, "facts.json", facts[node.name].model_dump(mode="json", by_alias=True))
        live.append(node)

    # preflight each node before anything is installed
    feasible: list[Node] = []
    for node in live:
        facts[node.name], verdict = check_facts(recipe, target, facts[node.name],
                                                backend=default_backend(recipe, opts.backend))
        rd.write_node(node.name, "preflight.json", verdict.model_dump(mode="json"))
        if verdict.feasible:
            feasible.append(node)
        else:
            msg = verdict_summary(verdict).summary
            sink.emit(Event(time.time(), node.name, "preflight", "failed", f"refused: {msg}"))
            finish_node(node.name, "refused", failed_step="preflight",
                        log_tail=verdict.model_dump_json()[-2000:])

    lock = lock_file = lock_text = None
    if feasible:
        lock, lock_file, lock_text = take_lock(opts, recipe, target, say, found=early.lock(recipe, target))
        if lock_text:
            rd.write("lock.lock", lock_text)
        rd.update_run(lock_path=lock_file, lock_digest=getattr(lock, "digest", None))

    # the same resolution as `envbuild plan` (envbuild.plan.resolve)
    plan_opts = plan_options(opts, recipe, lock)
    from envbuild.plan.placeholders import inventory_values  # {inventory.*} from every node's facts

    plan_opts = replace(plan_opts, inventory=inventory_values([facts[n.name] for n in feasible]))
    def plan_all(plan_opts) -> dict[str, Plan]:
        plans: dict[str, Plan] = {}
        for node in feasible:
            plan = resolve(recipe, target, facts[node.name], lock,
                           replace(plan_opts, host=node.name, node_python=node.python,
                                   prefix=node_prefix(opts.prefix, node.name))).plan
            refuse_unverified(plan, opts.allow_unverified)
            bundle_offline.check_plan(opts, plan)  # --bundle: it carries all the plan needs (exit 1)
            check_from_step(plan, opts.from_step)
            plans[node.name] = plan
        return plans

    plans = plan_all(plan_opts)
    if not opts.dry_run and feasible:  # before anything installs: every index the plans name answers
        try:
            local = refuse_unreachable_indexes(feasible, plans)
        except BaseException:
            sink.close()
            raise
        folders = {d for served in local.values() for d in served.values()}
        if local and len(folders) == 1 and opts.wheelhouse is None:
            # pip would fall back to that folder after its retries, uv would not: install from it
            folder = folders.pop()
            say(f"{', '.join(sorted({u for s in local.values() for u in s}))} unreachable; the node's pip "
                f"find-links folder {folder} holds every wheel planned from it: installing from it "
                f"(as --wheelhouse {folder})")
            plan_opts = replace(plan_opts, wheelhouse=folder)
            plans = plan_all(plan_opts)
    pushed = _push_wheels(opts, feasible, plans, lock, rd, say)  # a fleet: wheels fetched once here
    if pushed is not None:
        plans = plan_all(replace(plan_opts, fleet=pushed.params))
    for name, plan in plans.items():
        rd.write_node(name, "plan.json", plan.to_json())

    cache_dir = str(rundir.envbuild_home() / "cache" / "wheels")
    bundle_offline.record(opts, rd, cache_dir)  # run.json: offline, the bundle's digest
    connections = {}
    for node in feasible:
        connections[node.name] = connection_vars(node)
        if node.is_local:  # the local node keeps Ansible's remote temp inside the run folder
            connections[node.name]["ansible_remote_tmp"] = str(rd.ansible / "home" / "remote")
    node_paths = {n.name: (facts[n.name].path or n.node_path) for n in feasible}
    rendered = render(plans, connections, node_paths, run_dir=str(rd.path), cache_dir=cache_dir)
    from envbuild.bundle.fleet import wheel_builders  # each extension built on one node per kind

    rendered.extravars["provision_wheel_builders"] = builders = wheel_builders(plans)
    for key in builders:  # a marker left by a failed build would not make the others wait
        if not any((Path(cache_dir) / key).glob("*.whl")):
            (Path(cache_dir) / key / ".built").unlink(missing_ok=True)
    rerun_from = {n: (p.steps[0].id if opts.force and p.steps else opts.from_step) for n, p in plans.items()}
    for name, sid in rerun_from.items():
        if sid:  # the playbook's envbuild_state runs every step again from this one
            rendered.inventory["all"]["hosts"][name]["provision_from_step"] = sid
    smoke_runs = {n.name: _smoke_runs(plans[n.name]) for n in feasible}
    job = ansible_exec.prepare(rd.ansible, rendered, forks=len(feasible), insecure=opts.insecure)
    command = job.command()

    if opts.dry_run:  # nothing installed: status "dry-run", never runs/latest, never a verdict
        rd.update_run(finished=rundir._now(), status="dry-run")
        sink.close()
        return ProvisionOutcome(rd.path, "dry-run", _exit(results), results, command, plans)
    if not feasible:
        sink.close()
        status, code = _finish(rd, results, len(nodes))
        return ProvisionOutcome(rd.path, status, code, results, command, plans)

    # one round trip per node: markers, effects and the observed environment; when every step
    # of every node is done and holds, Ansible does not start at all (see _probe)
    probes = {} if any(rerun_from.values()) else early.probes(feasible, plans)
    if probes and all(p is not None and p.nothing_to_do for p in probes.values()):
        try:
            _nothing_to_do(rd, sink, feasible, plans, probes, finish_node)
        finally:
            sink.close()
        status, code = _finish(rd, results, len(nodes))
        return ProvisionOutcome(rd.path, status, code, results, command, plans)

    from envbuild.interrupt import StopRequest, signal_name, signum_of
    from envbuild.redact import secret_values

    masked = secret_values(rendered.inventory)  # ansible_password & co. of an inventory
    rd.redactor.add(masked)
    sink.redactor.add(masked)
    tracker = StateTracker()  # a StepTracker that also keeps each node's Envbuild state answer
    started = time.time()
    stop = StopRequest()  # SIGINT/SIGTERM from here on: stop ansible's process group, record, exit 128+n
    try:
        with stop:
            # the build logs of local nodes, tailed live into the progress display (remote
            # nodes keep theirs on the node: envbuild.execute.livelog)
            from envbuild.execute.livelog import LiveTail, log_paths

            local_logs = {} if opts.json_lines else {n.name: log_paths(plans[n.name]) for n in feasible if n.is_local}
            with LiveTail(local_logs, sink.emit):
                ran = ansible_exec.execute(job, sink, tracker, stop, mask=masked)
            duration = round(time.time() - started, 2)
            for node in feasible:
                t = tracker.hosts.get(node.name)
                rd.write_node(node.name, "log.txt", "\n".join(t.log) + "\n" if t else "")
                status, step, why = _node_status(node.name, t, ran, tracker, plans[node.name])
                if status == "interrupted":
                    sink.emit(Event(time.time(), node.name, step, "interrupted", f"by {signal_name(ran.signum or 2)}"))
                if t is None:
                    finish_node(node.name, status, failed_step=step, log_tail=why)
                    continue
                finish_node(node.name, status, failed_step=step, command=t.command, rc=t.rc,
                            log_tail=(why + "\n" if why else "") + t.tail(),
                            changed=t.changed + t.ok, skipped=t.skipped,
                            duration_s=round((t.finished or time.time()) - started, 2) if step else duration,
                            **tracker.reruns(node.name))
                if ran.signum is not None or stop.requested:
                    continue  # interrupted: touch the nodes no more
                if status == "ok" or t.failed_step == "smoke":  # installed either way: record what is there
                    _observe(rd, node, plans[node.name], lock_text)
                if status in ("ok", "failed"):
                    _merge_smoke(rd, node.name, smoke_runs[node.name], recipe)
        signum = ran.signum or stop.signum
        if signum is not None:
            _interrupted(rd, results, [n.name for n in feasible], tracker, signum)
            return ProvisionOutcome(rd.path, "interrupted", 128 + signum, results, command, plans)
    except BaseException as exc:  # an interrupt or an error in the middle is never "ok"
        signum = signum_of(exc)
        if signum is not None:
            _interrupted(rd, results, [n.name for n in feasible], tracker, signum)
        else:
            for name in (n.name for n in feasible if n.name not in results):
                finish_node(name, "error", failed_step=_current(tracker, name), log_tail=f"{type(exc).__name__}: {exc}")
            rd.update_run(finished=rundir._now(), status="error", error=f"{type(exc).__name__}: {exc}")
        raise
    finally:
        sink.close()
    status, code = _finish(rd, results, len(nodes))
    return ProvisionOutcome(rd.path, status, code, results, command, plans)


def _push_wheels(opts: ProvisionOptions, nodes: list[Node], plans: dict[str, Plan], lock, rd: rundir.RunDir,
                 say: Callable[[str], None]):
    """A fleet (``envbuild.bundle.fleet``): every wheel of ``plans`` fetched once into the
    controller's cache and pushed to the nodes; None (each node uses its index) for one node
    (unless ``--push-wheels``), the controller itself, an offline bundle, a dry run, or a lock
    without a verified file for everything planned. run.json's ``fleet`` says which and why."""
    from envbuild.bundle import fleet

    remote = [n for n in nodes if not n.is_local]
    want = opts.push_wheels if opts.push_wheels is not None else len(remote) > 1
    why = ("--no-push-wheels" if opts.push_wheels is False else "one node" if not want
           else "the controller is the node" if not remote else "an offline bundle" if opts.bundle
           else "a dry run downloads nothing" if opts.dry_run else fleet.unpushable(plans, lock))
    if why:
        rd.update_run(fleet={"pushed": False, "nodes": len(nodes), "why": why})
        return None
    say(f"{len(remote)} node(s): every wheel once on the controller, pushed to each node")
    staged = fleet.stage_wheels(plans, lock, Path(opts.wheelhouse) if opts.wheelhouse else None,
                                rundir.envbuild_home(), say)
    rd.update_run(fleet=staged.summary(len(nodes)))
    return staged


def _current(tracker: StepTracker, host: str) -> str | None:
    t = tracker.hosts.get(host)
    return t.current if t else None


def _node_status(host: str, t, ran: ansible_exec.RunResult, tracker: StepTracker,
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

        return "interrupted", current, f"interrupted by {signal_name(ran.signum or 2)}" + (f" during {current}" if current else "")
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


def _interrupted(rd: rundir.RunDir, results: dict[str, dict], hosts: list[str], tracker: StepTracker,
                 signum: int) -> None:
    """Record an interrupted run: each node not yet finished is "interrupted" at the step it was in."""
    from envbuild.interrupt import signal_name

    name = signal_name(signum)
    for host in hosts:
        res = results.get(host)
        if res is not None and res["status"] != "interrupted":
            continue  # it had finished (ok, failed, unreachable) before the signal
        step = (res or {}).get("failed_step") or _current(tracker, host)
        res = {"command": None, "rc": None, "log_tail": "", "changed": [], "skipped": [], "duration_s": 0.0,
               **(res or {}), "status": "interrupted", "failed_step": step, "signal": name}
        results[host] = res
        rd.write_node(host, "result.json", res)
    rd.update_run(finished=rundir._now(), status="interrupted", signal=name,
                  interrupted_at={h: results[h].get("failed_step") for h in hosts})


def _finish(rd: rundir.RunDir, results: dict[str, dict], n: int) -> tuple[str, int]:
    """A finished (non-dry, uninterrupted) run: status, the report's verdict, runs/latest.
    The exit code follows the verdict: a run whose report says FAIL never exits 0."""
    status = _overall(results, n)
    rd.update_run(finished=rundir._now(), status=status)
    code = _exit(results)
    try:
        from envbuild.report import collect

        verdict = collect(rd.path).verdict
        rd.update_run(verdict=verdict.status, verdict_reasons=[r.model_dump(mode="json") for r in verdict.reasons])
        failed = verdict.status != "PASS"
    except Exception as exc:  # noqa: BLE001 - a run that cannot be judged did not pass
        rd.update_run(verdict="FAIL", verdict_reasons=[{"kind": "report", "message": f"{type(exc).__name__}: {exc}"}])
        failed = True
    rd.publish()
    return status, (code or 1) if failed else code


def node_prefix(prefix: str | None, node: str) -> str | None:
    """``--prefix`` for one node: ``{node}`` becomes the node's name (nodes that share a
    filesystem, such as loopback test nodes, each get their own environment)."""
    import re

    return prefix.replace("{node}", re.sub(r"[^A-Za-z0-9._-]", "_", node)) if prefix else prefix


def check_from_step(plan: Plan, step_id: str | None) -> None:
    """``--from-step ID`` names a step of the plan (InputError listing the ids otherwise)."""
    ids = [s.id for s in plan.steps]
    if step_id is not None and step_id not in ids:
        raise InputError(f"--from-step {step_id}: no such step in the plan for {plan.host}",
                         hint=f"the steps are: {', '.join(ids)}")


class StateTracker(StepTracker):
    """A StepTracker that also keeps each node's ``Envbuild state`` answer: which steps run
    again because their effect did not hold, and which run as a repair (pip --force-reinstall)."""

    def __init__(self) -> None:
        super().__init__()
        self.state: dict[str, dict] = {}

    def feed(self, raw: dict) -> list[Event]:
        events = super().feed(raw)
        data = raw.get("event_data") or {}
        if raw.get("event") == "runner_on_ok" and task_name(str(data.get("task") or "")) == STATE_TASK and data.get("host"):
            res = data.get("res") or {}
            self.state[data["host"]] = res
            events += _rerun_events(data["host"], res)
        return events

    def reruns(self, host: str) -> dict:
        """result.json fields: steps run again because their effect did not hold."""
        return _rerun_fields(self.state.get(host) or {})


def _rerun_fields(state: dict) -> dict:
    return {"effect_failed": dict(state.get("effect_failed") or {}), "repair": list(state.get("repair") or []),
            "rerun_reasons": dict(state.get("reasons") or {})}


def _rerun_events(host: str, state: dict) -> list[Event]:
    now, repair = time.time(), set(state.get("repair") or [])
    return [Event(now, host, sid, "rerun", f"effect does not hold: {detail}; runs again"
                  + (" as a repair (reinstall)" if sid in repair else ""))
            for sid, detail in (state.get("effect_failed") or {}).items()]


def _probe_args(plan: Plan) -> tuple:
    """What a probe of ``plan`` sends: (python, prefix, steps with digests and effects, observe args)."""
    from envbuild.actions.nodestate import plan_steps
    from envbuild.observe import expected_state, observe_args

    if plan.backend == "container":  # the environment is in the image: the node's python3 checks
        return ("python3", plan.prefix, plan_steps(plan), None)  # the steps; observed in the image
    return (f"{plan.prefix.rstrip('/')}/bin/python", plan.prefix, plan_steps(plan),
            observe_args(expected_state(None, plan)))


def _probe(nodes: list[Node], plans: dict[str, Plan]) -> dict:
    """{node: Probe or None}: each node's step markers, step effects (the checks Ansible's
    envbuild_state makes) and observed environment in one command run by the environment's
    python (None: it could not run, e.g. no environment yet)."""
    from envbuild.actions.nodestate import parse_probe, probe_command

    def one(node: Node):
        python, prefix, steps, observe = _probe_args(plans[node.name])
        rc, out, _err = ssh.run(node, probe_command(python, prefix, steps, refresh=True, observe=observe))
        return parse_probe(out, node.name) if rc == 0 else None

    return {name: (None if isinstance(got, Exception) else got) for name, got in ssh.each(nodes, one).items()}


class _Early:
    """What provision reads from the nodes while it loads the recipe and the lock: the facts,
    and, in the same command, a speculative probe (``_probe``) of each node's plan in the
    latest finished run (``_facts_and_probe``). The probe counts only for a node whose new plan
    sends exactly what it sent (same prefix, steps, digests, effects): it then observed the
    node at the same time as the facts, and a no-op costs one round trip. Otherwise the node is
    probed again with its new plan."""

    def __init__(self, opts: ProvisionOptions):
        self.opts, self.nodes = opts, []
        self._pool = None
        self._facts = None
        self._spec_plans: dict[str, Plan] = {}

    def start(self, target) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.nodes = select_nodes(self.opts, target)
        if not (self.opts.dry_run or self.opts.force or self.opts.from_step):
            self._spec_plans = _latest_plans(target.name, [n.name for n in self.nodes])
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="envbuild-early")
        self._facts = self._pool.submit(ssh.each, self.nodes, lambda n: _facts_and_probe(n, self._spec_plans.get(n.name)))
        self._pool.shutdown(wait=False)

    def facts(self) -> dict:
        """{node: NodeFacts or the exception that kept them}."""
        return {name: got[0] if isinstance(got, tuple) else got for name, got in self._facts.result().items()}

    def read_lock(self, recipe, target) -> None:
        """Read the existing lock now, while the nodes answer (a stale one is refused later,
        where provision asks for the lock: only when a node is feasible)."""
        try:
            self._lock = ("ok", existing_lock(self.opts, recipe, target))
        except Exception as exc:  # noqa: BLE001 - raised again by lock()
            self._lock = ("error", exc)

    def lock(self, recipe, target):
        kind, value = getattr(self, "_lock", ("ok", None))
        if kind == "error":
            raise value
        return value if value is not None else existing_lock(self.opts, recipe, target)

    def probes(self, nodes: list[Node], plans: dict[str, Plan]) -> dict:
        """{node: Probe or None} for ``plans``: the speculative probe where it probed the same
        thing, a new probe elsewhere."""
        spec = {name: got[1] for name, got in self._facts.result().items() if isinstance(got, tuple)}
        out, again = {}, []
        for node in nodes:
            old = self._spec_plans.get(node.name)
            if old is not None and spec.get(node.name) is not None and _probe_args(old) == _probe_args(plans[node.name]):
                out[node.name] = spec[node.name]
            else:
                again.append(node)
        return {**out, **(_probe(again, plans) if again else {})}


STATE_START, STATE = "envbuild_state_start", "envbuild_state"


def _facts_and_probe(node: Node, plan: Plan | None):
    """(facts, Probe or None) of one node in one command: the facts script with the probe of
    ``plan`` as two more sections, the first starting it in the background, the last waiting
    for it, so it runs beside the fact probes (``envbuild.facts.gather``, plus that probe)."""
    import shlex
    from datetime import datetime, timezone

    from envbuild.actions.nodestate import parse_probe, probe_command
    from envbuild.facts.assemble import all_probes, assemble
    from envbuild.facts.probe import Probe
    from envbuild.facts.script import build_script, split_sections

    probes = [p for p in all_probes() if p.name != "pip_list"]
    if plan is not None:
        python, prefix, steps, observe = _probe_args(plan)
        cmd = probe_command(python, prefix, steps, refresh=True, observe=observe)
        t = '"$__eb_t"'
        probes = [Probe(STATE_START, f"{{ {cmd} >{t}/state.out 2>{t}/state.err; echo $? >{t}/state.rc.tmp; "
                                     f"mv {t}/state.rc.tmp {t}/state.rc; }} </dev/null >/dev/null 2>&1 &"),
                  *probes,
                  Probe(STATE, f"i=0; while [ ! -f {t}/state.rc ] && [ $i -lt 12000 ]; do sleep 0.05; i=$((i+1)); done; "
                               f"cat {t}/state.out; exit \"$(cat {t}/state.rc 2>/dev/null || echo 124)\"")]
    result = _NodeRunner(node).run("sh -c " + shlex.quote(build_script(probes)))
    sections = split_sections(result.stdout)
    if not sections:
        raise EnvironmentProblem(
            f"{node.name}: the facts script printed nothing (exit {result.rc}): "
            + (result.stderr.strip().splitlines() or ["no error output"])[0],
            hint="check that /bin/sh works for this user on the node")
    facts = assemble(sections, node.name, collected_at=datetime.now(timezone.utc).replace(microsecond=0).isoformat())
    if plan is None:
        return facts
    state = sections.get(STATE)
    try:
        probe = parse_probe(state.out, node.name) if state is not None and state.rc == 0 else None
    except EnvironmentProblem:
        probe = None
    return facts, probe


def _latest_plans(target: str, names: list[str]) -> dict[str, Plan]:
    """{node: plan} of the latest finished run for ``target`` (empty when there is none)."""
    latest = rundir.envbuild_home() / "runs" / "latest"
    out: dict[str, Plan] = {}
    try:
        run = json.loads((latest / "run.json").read_text())
        if run.get("target") != target:
            return out
        for name in names:
            path = latest / "nodes" / name / "plan.json"
            if path.is_file():
                out[name] = Plan.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return {}
    return out


def _nothing_to_do(rd: rundir.RunDir, sink: EventSink, nodes: list[Node], plans: dict[str, Plan],
                   probes: dict, finish_node: Callable[..., None]) -> None:
    """Record a run in which every step of every node was done and its effect held: what
    Ansible would have recorded (every step skipped), the observed state, no Ansible."""
    rd.update_run(ansible="not started: every step done and its effect holds on every node")
    for node in nodes:
        probe, now = probes[node.name], time.time()
        effects = probe.state.get("effects") or {}
        lines = []
        for step in plans[node.name].steps:
            detail = (effects.get(step.id) or {}).get("detail") or "marker only (no observable effect)"
            sink.emit(Event(now, node.name, step.id, "skipped", f"done; {detail}"))
            lines.append(f"skipped {step.id}: done; {detail}")
        rd.write_node(node.name, "log.txt", "\n".join(lines) + "\n")
        finish_node(node.name, "ok", skipped=[s.id for s in plans[node.name].steps], **_rerun_fields(probe.state))
        if probe.observed is not None:
            from envbuild.observe import parse_observed

            obs = parse_observed(json.dumps(probe.observed), node.name)
            rd.write_node(node.name, "observed.json", obs.model_dump(mode="json", by_alias=True))
        elif plans[node.name].backend == "container":  # observed inside the image
            _observe(rd, node, plans[node.name], None)


def _observe(rd: rundir.RunDir, node: Node, plan: Plan, lock_text: str | None) -> None:
    """observed.json from the live node (envbuild.observe's node script)."""
    import yaml

    from envbuild.observe import expected_state, observe_args, observe_command, parse_observed

    lock = yaml.safe_load(lock_text) if lock_text else None
    exp = expected_state(lock, plan)
    cmd = observe_command(f"{plan.prefix}/bin/python", observe_args(exp))
    if plan.backend == "container":
        from envbuild.plan.container import image_observe_command

        cmd = image_observe_command(plan)
    rc, out, err = ssh.run(node, cmd)
    if rc == 0:
        rd.write_node(node.name, "observed.json", parse_observed(out, node.name).model_dump(mode="json", by_alias=True))


def _smoke_runs(plan: Plan) -> tuple[list[dict], str | None]:
    """(the plan's smoke runs, why the native benchmark does not run here)."""
    step = next((s for s in plan.steps if s.kind in ("smoke", "image_smoke")), None)
    if step is None:
        return [], None
    return [r.model_dump(mode="json") for r in step.params.runs], step.params.native_skip


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
    """4 a node failed a step (or ansible timed out / ended early), 3 unreachable, 1 refused;
    0 only when every node is ok. (Interrupts exit 128 + signal; see provision().)"""
    statuses = {r["status"] for r in results.values()}
    for status in ("failed", "error", "unreachable", "refused"):
        if status in statuses:
            return EXIT.get(status, 4)
    return 0 if statuses <= {"ok"} else 4
