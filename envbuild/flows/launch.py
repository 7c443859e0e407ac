"""The launch flow: a recipe's published run rendered for a scheduler, and with ``submit``
run there, after its provision run's nodes are verified.

``launch(LaunchRequest(...)) -> LaunchOutcome``. The plan is a provision run's (``run``, else
the newest of the recipe on the target when submitting), else the image's for a container
recipe run in its container, else the node plan resolved as ``envbuild plan`` does. Before a
submit, the provision run's nodes are verified (``envbuild.flows.verify.runners``: the nodes
and the SSH key and known_hosts files the provision recorded, the request's ``nodes`` over
them): drift refuses the job (``CheckFailed``), a node that cannot be observed too
(``EnvironmentProblem``). The job itself is ``envbuild.launch.submit.launch``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from envbuild import rundir
from envbuild.connect.selection import NodeSelection
from envbuild.errors import CheckFailed, EnvironmentProblem, InputError
from envbuild.flows.verify import runners
from envbuild.launch import LaunchOptions, Rendered, render_launch
from envbuild.launch import submit as sub
from envbuild.record import RunRecord, read_run_info
from envbuild.verify import UNFINISHED, NodeVerdict, resolve_run, verify


@dataclass(frozen=True)
class LaunchRequest:
    """What ``envbuild launch`` was asked: the recipe and target (names or YAML paths), the
    scheduler's options, ``submit`` (run the job and collect it), the provision ``run`` whose
    plan is launched, the inputs of a plan made without one (``facts_file``, ``lock_file``,
    ``prefix``, ``git_mirror``), ``nodes`` (a key or known_hosts files over the run's own, for
    verifying), the job's ``timeout``, the command line (``argv``) and extra environment of
    the job's commands (``env``)."""

    recipe: str
    target: str
    options: LaunchOptions
    submit: bool = False
    run: Path | None = None
    facts_file: str | None = None
    lock_file: str | None = None
    prefix: str | None = None
    git_mirror: str | None = None
    nodes: NodeSelection = field(default_factory=NodeSelection)
    timeout: float = 3600
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] | None = None


@dataclass
class LaunchOutcome:
    """The rendered launch file; with a submit, the job's run (``job``), the provision run it
    verified (``provisioned``, None when there was none) and what verify said of each node."""

    rendered: Rendered
    job: sub.Outcome | None = None
    provisioned: Path | None = None
    verified: list[NodeVerdict] = field(default_factory=list)

    @property
    def unverified(self) -> bool:
        """A job submitted without a provision run to verify first."""
        return self.job is not None and self.provisioned is None


def launch(request: LaunchRequest, *, warn: Callable[[str], None] | None = None) -> LaunchOutcome:
    """Render, and with ``submit`` verify, submit, follow and collect (module docstring).
    ``warn`` is told, before the job is submitted, when there is no provision run to verify."""
    from envbuild.recipes import load_recipe
    from envbuild.targets import load_target

    opts = request.options
    rec, tgt = load_recipe(request.recipe), load_target(request.target)
    if opts.k8s_workload != "job" and opts.scheduler != "k8s":
        raise InputError(f"--k8s-workload is a Kubernetes option; the scheduler is {opts.scheduler}",
                         hint="drop --k8s-workload, or use --scheduler k8s")
    if request.submit and opts.scheduler not in ("slurm", "local"):
        raise InputError(f"--submit runs slurm and local jobs; {opts.scheduler} is render-only here",
                         hint="write the file with -o and submit it yourself (qsub / kubectl apply -f)")
    provisioned = provisioned_run(rec.name, tgt.name, request.run) if (request.submit or request.run) else None
    plan = launch_plan(rec, tgt, run_dir=provisioned, facts_file=request.facts_file, lock_file=request.lock_file,
                       prefix=request.prefix, git_mirror=request.git_mirror, container=not opts.no_container)
    if not request.submit:
        rendered = render_launch(rec, tgt, plan, opts)
        for w in rendered.job.warnings if warn is not None else ():
            warn(w)
        return LaunchOutcome(rendered, provisioned=provisioned)
    verdicts = verify_nodes(provisioned, request.nodes) if provisioned is not None else []
    if provisioned is None and warn is not None:
        warn(f"no provision run of {rec.name} on {tgt.name}: the nodes' environments are not verified "
             "before submitting")
    job = sub.launch(rec, tgt, plan, opts, argv=request.argv, env=request.env, timeout=request.timeout,
                     provisioned=provisioned, verdicts=verdicts)
    for w in job.rendered.job.warnings if warn is not None else ():
        warn(w)
    return LaunchOutcome(job.rendered, job, provisioned, verdicts)


def verify_nodes(run_dir: Path, given: NodeSelection | None = None) -> list[NodeVerdict]:
    """``envbuild.verify`` on the nodes of a provision run, reached as the provision reached
    them (its recorded selection: key, known_hosts files, host keys checked); drift is a
    ``CheckFailed``, a node that cannot be observed an ``EnvironmentProblem``."""
    verdicts = verify(run_dir, runners(run_dir, given))
    drifted = [v.node for v in verdicts if v.status == "drift"]
    if drifted:
        raise CheckFailed(f"not submitting: drift on {', '.join(drifted)} (run {run_dir.name})",
                          hint=f"reprovision those nodes (envbuild provision) or see envbuild verify --run {run_dir}")
    down = [f"{v.node} ({v.message})" for v in verdicts if v.status == "unreachable"]
    if down:
        raise EnvironmentProblem(f"not submitting: could not verify {'; '.join(down)}",
                                 hint="check that the nodes are up and the environment prefix exists")
    return verdicts


def provisioned_run(recipe: str, target: str, run: str | Path | None) -> Path | None:
    """The provision run of ``recipe`` on ``target`` to verify before submitting: ``run`` when
    given, else the newest finished provision run for the target (launch runs, which carry
    copies of their provision's node records, are passed over) when it is of ``recipe`` and
    has node plans; None otherwise."""
    if run is not None:
        return resolve_run(run)
    runs = rundir.envbuild_home() / "runs"
    for cand in sorted({*runs.glob(f"*-{target}"), *runs.glob(f"*-{target}.*")}, reverse=True):
        if not cand.is_dir() or cand.is_symlink() or not (cand / "run.json").is_file():
            continue
        rec = read_run_info(cand)
        if rec.status in UNFINISHED or rec.job is not None:
            continue
        has_plans = any((n.path / "plan.json").exists() for n in RunRecord.load(cand).nodes())
        return cand.resolve() if rec.recipe == recipe and has_plans else None
    return None


def launch_plan(rec, tgt, *, run_dir: Path | None, facts_file, lock_file, prefix, git_mirror, container: bool):
    """The plan the launch reads: a provisioned run's, else the image's for a container
    recipe run in its container, else the node plan resolved as ``envbuild plan`` does."""
    from envbuild.inputs import find_lock, node_facts
    from envbuild.plan.build import PlanOptions
    from envbuild.plan.resolve import fetch_urls, resolve

    if run_dir is not None:
        plans = [n.plan for n in RunRecord.load(run_dir).nodes() if n.plan is not None]
        if not plans:
            raise InputError(f"run {run_dir.name} has no node plan", hint="pass a provision run (envbuild provision ...)")
        return plans[0]
    lock = find_lock(rec, tgt, lock_file)
    if container and rec.environment.kind == "container" and not prefix:
        from envbuild.plan.image import image_plan
        from envbuild.plan.placeholders import inventory_values  # {inventory.*} patches: --facts

        return image_plan(rec, tgt, lock, inventory=inventory_values(node_facts(tgt, facts_file))
                          if facts_file else None).plan
    facts = node_facts(tgt, facts_file)[0]
    # the lock's git pins too (git dependencies of source installs), as plan and provision do
    opts = PlanOptions(prefix=prefix, git_mirror=git_mirror, host=facts.host,
                       fetch_urls=fetch_urls(rec, git_mirror, lock))
    return resolve(rec, tgt, facts, lock, opts).plan
