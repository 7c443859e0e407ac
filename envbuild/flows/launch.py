"""The launch flow: a recipe's published run rendered for a scheduler, and with ``submit``
run there, after its provision run's nodes are verified.

``launch(LaunchRequest(...)) -> LaunchOutcome``. The plan is a provision run's (``run``, else
the newest of the recipe on the target when submitting), else the image's for a container
recipe run in its container, else the node plan resolved as ``envbuild plan`` does. Before a
submit that runs the recipe's training command, the provision run's nodes are held against the
GPUs per node the job asks (``check_job_gpus``, from their recorded facts: a run provisioned
with ``--no-smoke`` on too few GPUs is refused, ``CheckFailed``); then its nodes are verified
(``envbuild.flows.verify.runners``: the nodes and the SSH key and known_hosts files the
provision recorded, the request's key and ``known_hosts`` files over them): drift refuses the
job (``CheckFailed``), a node that cannot be observed too (``EnvironmentProblem``). The job
itself is ``envbuild.launch.submit.launch``; the outcome says what the command ends with
(``failure``: exit 1, ``not_judged``: exit 5).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from envbuild import rundir
from envbuild.bundle import envpack
from envbuild.bundle.envpack import PackedEnv
from envbuild.connect.selection import NodeSelection
from envbuild.errors import CheckFailed, EnvironmentProblem, InputError
from envbuild.flows.nodes import NodesRequest
from envbuild.flows.verify import runners
from envbuild.launch import LaunchOptions, Rendered, build_job, render_launch
from envbuild.launch import submit as sub
from envbuild.record import RunRecord, read_run_info
from envbuild.record.verdict import NOT_JUDGED
from envbuild.render import sitetemplates
from envbuild.verify import UNFINISHED, NodeVerdict, resolve_run, verify


@dataclass(frozen=True)
class LaunchRequest:
    """What ``envbuild launch`` was asked: the recipe and target (names or YAML paths), the
    ``scheduler`` and the job's shape (``nodes``, ``gpus_per_node``, ``variant``, what it runs:
    ``smoke_only``, ``command_override``, ``container_image``/``no_container``; where it runs:
    ``time_limit``, ``partition``, ``account``, ``namespace``, ``kueue_queue``,
    ``k8s_workload`` (None: an Indexed Job), ``master_port``), a ``packed`` environment (its
    provenance checked with ``pack_keys``) sent with sbcast's ``fanout``, the site's
    ``templates`` folder, ``out`` (the file to write; None: the caller prints the text),
    ``submit`` (run the job and collect it), the provision ``run`` whose plan is launched, the
    inputs of a plan made without one (``facts_file``, ``lock_file``, ``prefix``,
    ``git_mirror``), an SSH key or ``known_hosts`` files (``reach``) over the run's own for
    verifying, the job's ``timeout``, the command line (``argv``) and extra environment of
    the job's commands (``env``)."""

    recipe: str
    target: str
    scheduler: str
    nodes: int | None = None
    gpus_per_node: int | None = None
    variant: str | None = None
    smoke_only: bool = False
    command_override: str | None = None
    container_image: str | None = None
    no_container: bool = False
    time_limit: str | None = None
    partition: str | None = None
    account: str | None = None
    namespace: str | None = None
    kueue_queue: str | None = None
    k8s_workload: str | None = None
    master_port: int | None = None
    packed: Path | None = None
    pack_keys: tuple[Path, ...] = ()
    fanout: int | None = None
    templates: Path | None = None
    out: Path | None = None
    submit: bool = False
    run: Path | None = None
    facts_file: str | None = None
    lock_file: str | None = None
    prefix: str | None = None
    git_mirror: str | None = None
    reach: NodesRequest = NodesRequest()
    timeout: float = 3600
    argv: tuple[str, ...] = ()
    env: dict[str, str] | None = None


@dataclass
class LaunchOutcome:
    """The rendered launch file and where it was written (``file``, None: not written); with a
    submit, the job's run (``job``), the provision run it verified (``provisioned``, None when
    there was none) and what verify said of each node."""

    rendered: Rendered
    job: sub.Outcome | None = None
    provisioned: Path | None = None
    verified: list[NodeVerdict] = field(default_factory=list)
    file: Path | None = None

    @property
    def unverified(self) -> bool:
        """A job submitted without a provision run to verify first."""
        return self.job is not None and self.provisioned is None

    @property
    def failure(self) -> CheckFailed | None:
        """What a submitted job ends the command with (exit 1): the job did not complete (its
        state, reason and output tail), or it completed and its result does not pass; None when
        it passed, is NOT JUDGED, or nothing was submitted."""
        job = self.job
        if job is None:
            return None
        res = job.result
        if not res.ok:
            return CheckFailed(f"job {res.job_id} {res.state} (exit {res.exit_code})"
                               + (f": {res.reason}" if res.reason else "") + "\n" + res.tail(),
                               hint=f"the job's output is in {job.run_dir / 'job'}")
        if job.status != NOT_JUDGED and not job.passed:
            return CheckFailed("the job finished but its result does not pass", hint=f"envbuild report {job.run_dir}")
        return None

    @property
    def not_judged(self) -> str | None:
        """Why a submitted job that completed is NOT JUDGED (the judge's reason, else why the
        recipe's benchmark did not run); None otherwise."""
        job = self.job
        if job is None or not job.result.ok or job.status != NOT_JUDGED:
            return None
        native = job.smoke.native
        return (native.verdict.reason if native is not None and native.verdict is not None else "") \
            or "the recipe's benchmark did not run in this job (" + ((native.reason if native else None)
                                                                     or "smoke only") + ")"


def options(request: LaunchRequest) -> LaunchOptions:
    """The scheduler's options from the request: the pack read (its sha256 checked against its
    manifest; with ``pack_keys``, its signed provenance first) and the site's templates read;
    options that need another one refused (InputError)."""
    opts = LaunchOptions(scheduler=request.scheduler, nodes=request.nodes, gpus_per_node=request.gpus_per_node,
                         variant=request.variant, smoke_only=request.smoke_only,
                         command_override=request.command_override, container_image=request.container_image,
                         no_container=request.no_container, time_limit=request.time_limit,
                         partition=request.partition, account=request.account, namespace=request.namespace,
                         kueue_queue=request.kueue_queue, k8s_workload=request.k8s_workload or "job",
                         master_port=request.master_port, packed=_packed(request.packed, request.pack_keys),
                         fanout=request.fanout,
                         templates=sitetemplates.read_site(request.templates) if request.templates else ())
    if request.fanout and request.packed is None:
        raise InputError("--fanout is the fan-out of the pack's sbcast; there is no --packed",
                         hint="drop --fanout, or give --packed FILE")
    if request.k8s_workload and request.scheduler != "k8s":
        raise InputError(f"--k8s-workload is a Kubernetes option; the scheduler is {request.scheduler}",
                         hint="drop --k8s-workload, or use --scheduler k8s")
    return opts


def _packed(path: Path | None, keys: tuple[Path, ...] = ()) -> PackedEnv | None:
    """The pack at ``path``, its sha256 checked against its manifest (None without --packed);
    with ``keys``, its signed provenance checked first (``envpack.trusted``)."""
    if path is None:
        if keys:
            raise InputError("--trusted-key checks the signature of a --packed pack; none was given",
                             hint="add --packed FILE, or drop --trusted-key")
        return None
    return envpack.trusted(path, list(keys)) if keys else envpack.read(path)


def launch(request: LaunchRequest, *, warn: Callable[[str], None] | None = None) -> LaunchOutcome:
    """Render, and with ``submit`` verify, submit, follow and collect (module docstring);
    rendered only, the file is written to ``out`` when given (executable, but for Kubernetes).
    ``warn`` is told, before the job is submitted, when there is no provision run to verify."""
    from envbuild.recipes import load_recipe
    from envbuild.targets import load_target

    opts = options(request)
    rec, tgt = load_recipe(request.recipe), load_target(request.target)
    if request.submit and opts.scheduler not in ("slurm", "local"):
        raise InputError(f"--submit runs slurm and local jobs; {opts.scheduler} is render-only here",
                         hint="write the file with -o and submit it yourself (qsub / kubectl apply -f)")
    provisioned = provisioned_run(rec.name, tgt.name, request.run) if (request.submit or request.run) else None
    plan = launch_plan(rec, tgt, run_dir=provisioned, facts_file=request.facts_file, lock_file=request.lock_file,
                       prefix=request.prefix, git_mirror=request.git_mirror, container=not opts.no_container)
    if not request.submit:
        rendered = render_launch(rec, tgt, plan, opts)
        for w in rendered.job.warnings:
            if warn is not None:
                warn(w)
        if request.out is not None:
            request.out.write_text(rendered.text)
            if opts.scheduler != "k8s":
                request.out.chmod(0o755)
        return LaunchOutcome(rendered, provisioned=provisioned, file=request.out)
    if provisioned is not None and not (request.smoke_only or request.command_override):
        check_job_gpus(provisioned, rec, job_gpus(rec, build_job(rec, tgt, plan, opts).gpus_per_node, opts))
    selection = request.reach.selection()
    verdicts = verify_nodes(provisioned, selection) if provisioned is not None else []
    if provisioned is None and warn is not None:
        warn(f"no provision run of {rec.name} on {tgt.name}: the nodes' environments are not verified "
             "before submitting")
    job = sub.launch(rec, tgt, plan, opts, argv=list(request.argv), env=request.env, timeout=request.timeout,
                     provisioned=provisioned, verdicts=verdicts)
    for w in job.rendered.job.warnings:
        if warn is not None:
            warn(w)
    return LaunchOutcome(job.rendered, job, provisioned, verdicts)


def job_gpus(rec, asked: int, opts: LaunchOptions) -> int:
    """The GPUs per node a job's training command needs: the job's (``asked``: the variant's run
    section or ``--gpus-per-node``, else the target's count), and for the recipe's own benchmark
    command with neither given, at least the GPUs the benchmark needs (opt-175b-azure-h100's TP 2
    on a target whose profile counts one)."""
    if opts.variant is None and opts.gpus_per_node is None and rec.benchmark is not None:
        return max(asked, rec.benchmark.needs_gpus)
    return asked


def check_job_gpus(run_dir: Path, rec, gpus_per_node: int) -> None:
    """The provision run's installed nodes against the GPUs per node the job needs (``job_gpus``),
    read from each node's recorded
    facts (facts.json, as gathered). An install without its benchmark (``provision --no-smoke``)
    may have gone ahead on a node with fewer (``too-few-gpus`` a warning in its preflight.json):
    the job is refused (``CheckFailed``) before the nodes are verified, and so is a node whose
    facts the run did not record (its GPUs unknown)."""
    record = RunRecord.load(run_dir)
    short, unknown = [], []
    for node in record.nodes():
        if node.plan is None:
            continue
        if node.facts is None:
            unknown.append(node.host)
        elif len(node.facts.gpus) < gpus_per_node:
            short.append(f"{node.host} has {len(node.facts.gpus)}")
    if short or unknown:
        how = " (provisioned with --no-smoke: judged without the benchmark)" if record.run.smoke_skipped else ""
        said = short + [f"{host}: no facts recorded, its GPUs unknown" for host in unknown]
        raise CheckFailed(f"not submitting: the job runs {rec.name} on {gpus_per_node} GPU(s) per node, "
                          f"and the nodes of run {run_dir.name}{how} have fewer: " + "; ".join(said),
                          hint="provision nodes with enough GPUs for the job (envbuild provision without "
                               "--no-smoke judges them), or launch a variant or --gpus-per-node they have, "
                               "or replace the training command (--smoke-only, --command-override)")


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
