"""recipe + target + plan + options -> ``Job``: what every scheduler renderer writes. Pure.

The environment comes from the plan: the task sources the env file the plan's ``env-file``
step writes (``<prefix>/.envbuild/env.sh``), after ``module load`` when the plan's environment
is a module's Python (Polaris). Source checkouts (``{sources.NAME}`` in the recipe's command)
are the plan's ``git_source`` destinations; the smoke scripts are in the plan's smoke folder.
Nothing here re-spells install syntax.

Every task starts the same way on every scheduler (``task_script``); the schedulers differ
only in how they start tasks and in how they set the variables the task reads:
``ENVBUILD_NNODES``, ``ENVBUILD_NODE_RANK``, ``ENVBUILD_MASTER_ADDR`` (first node),
``ENVBUILD_MASTER_PORT``, ``ENVBUILD_GPUS_PER_NODE``, ``ENVBUILD_NPROC_PER_NODE`` (ranks per
node) and ``ENVBUILD_JOB_ID``.

``--smoke-only`` replaces the training command by envbuild's CPU smoke (the all-reduce of
``collective.py`` over every rank of every node, gloo) and ``--command-override`` by a command
the user gives; both are written at the top of the script and printed by the job, never silent.
"""

from __future__ import annotations

import re
from pathlib import Path
from dataclasses import dataclass, field, replace

from envbuild import __version__
from envbuild.bundle.envpack import PackedEnv
from envbuild.errors import InputError
from envbuild.launch import pyxis
from envbuild.launch.queues import QueueChoice, choose_queue, default_walltime
from envbuild.plan.container import sqsh_path
from envbuild.recipes.schema import Run
from envbuild.plan.image import prepare_script, stage_name
from envbuild.render.shell import q, heredoc_delimiter
from envbuild.plan.capture import capture
from envbuild.shipped import NODE
from envbuild.targets.schema import DNS_LABEL, WALLTIME

SCHEDULERS = ("slurm", "pbs", "k8s", "local")
K8S_WORKLOADS = ("job", "jobset", "trainjob", "pytorchjob")
TARGET_SCHEDULER = {"slurm": "slurm", "pbs": "pbs", "kubernetes": "k8s"}
SMOKE_PARSER = "envbuild-smoke"
VAR = re.compile(r"\$(ENVBUILD_[A-Z_]+)")
FIELD = re.compile(r"\{(cwd|job_dir|sources\.[A-Za-z0-9_.-]+)\}")
SAFE_PATH = re.compile(r"^[A-Za-z0-9_./%~+=:,@-]+$")
ADDRESS_SCRIPT = "ib_addresses.py"  # envbuild/node/ib_addresses.py, written into the job folder
ADDRESS_SOURCE = NODE / ADDRESS_SCRIPT
DEFAULT_NAMESPACE = "envbuild"  # Kubernetes: a namespace of envbuild's own, never the shared "default"
DEFAULT_RDMA = "rdma/hca_shared_devices_a"  # Mellanox k8s-rdma-shared-dev-plugin example/test-hca-pod.yaml
# a target's jobs field -> (the launch flag that gives it, an example value, what it is)
JOB_FLAGS = {"account": ("--account", "PROJECT", "a project (account)"),
             "queue": ("--partition", "QUEUE", "a queue (partition)")}


@dataclass(frozen=True)
class LaunchOptions:
    """What the user chose (``envbuild launch`` options)."""

    scheduler: str
    nodes: int | None = None
    gpus_per_node: int | None = None
    variant: str | None = None
    smoke_only: bool = False
    command_override: str | None = None
    container_image: str | None = None
    no_container: bool = False
    output_dir: str = "."  # where the job's output files land (shared by every node)
    time_limit: str | None = None  # HH:MM:SS
    partition: str | None = None  # Slurm partition / PBS queue
    account: str | None = None
    namespace: str | None = None  # Kubernetes: else the target's jobs.namespace, else "envbuild"
    kueue_queue: str | None = None  # Kubernetes: a Kueue LocalQueue (else the target's jobs.kueue_queue)
    k8s_workload: str = "job"  # Kubernetes: "job" (an Indexed Job), "jobset", "trainjob" or "pytorchjob" (CRDs)
    rdma_resource: str = DEFAULT_RDMA
    master_port: int | None = None  # None: the scheduler's default
    regenerate: str = ""  # the command line that renders this again, for the header
    packed: PackedEnv | None = None  # the environment, packed once (envbuild pack): sent to every node
    fanout: int | None = None  # sbcast's --fanout for the pack (None: sbcast_fanout(nodes))
    # a site's own templates over envbuild's (sitetemplates.read_site): ((file name, text), ...)
    templates: tuple[tuple[str, str], ...] = ()


CHAIN_UP_TO = 16  # nodes: up to this many sbcast hands the pack to one node, beyond it to two


def sbcast_fanout(nodes: int) -> int:
    """sbcast's ``--fanout`` for the pack when the user gives none: 1 up to ``CHAIN_UP_TO``
    nodes (the batch host sends the file to one node, its own slurmd, which passes it on), 2
    beyond. ``--fanout`` shapes only sbcast's own first hop: on Slurm 22.05 every slurmd
    below it forwards with its own slurm.conf's ``TreeWidth`` (measured on the test bed:
    tests/launch/test_launch_slurm.py), so what the batch host sends in all is min(nodes - 1,
    TreeWidth) copies with a fan-out of 1, and at least min(nodes - 1, fan-out) with a wider
    one. Where a Slurm carries the fan-out down the tree, 1 is a chain, and a chain's time
    grows with its length (sbcast waits for each block to reach every node): hence 2 beyond 16."""
    return 1 if nodes <= CHAIN_UP_TO else 2


@dataclass(frozen=True)
class Job:
    """A launch, decided: every renderer reads only this."""

    recipe: str
    target: str
    scheduler: str
    variant: str | None
    name: str
    nodes: int
    gpus_per_node: int
    nproc_per_node: int  # ranks per node the launcher starts (GPUs, or 2 CPU ranks for the smoke)
    mode: str  # once | per-node | per-rank | pods
    commands: tuple[str, ...]  # shell text; one per pod for "pods", else one
    env_file: str | None  # None: the container image carries the environment
    cwd: str
    env: tuple[tuple[str, str], ...]  # (name, shell word)
    module: str | None = None
    container_image: str | None = None
    files: dict[str, str] = field(default_factory=dict)  # job-folder files written first
    notes: tuple[str, ...] = ()  # header lines: sources, replacements, deviations
    replaced: str | None = None  # why the training command is not the recipe's
    parser: str = ""
    metric: str | None = None
    output_dir: str = "."
    cpus_per_task: int | None = None
    cpu_cores: int | None = None
    memory_gib: int | None = None
    shm_size: str | None = None
    infiniband: bool = False
    scheduler_options: tuple[str, ...] = ()
    master_port: int | None = None  # None: the scheduler's default
    address_var: str | None = None  # filled at start with every rank's InfiniBand address
    prepare: str | None = None  # the image's prepare.sh (data without a recorded sha256), run first
    stage: str = "envbuild-data"  # the job-folder name of its prepared data (stage_name: the image's)
    header: tuple[str, ...] = ()
    options: LaunchOptions | None = None
    packed: PackedEnv | None = None  # distributed to every node and unpacked at its prefix first
    fanout: int = 1  # sbcast's --fanout for the pack (LaunchOptions.fanout or sbcast_fanout)
    warnings: tuple[str, ...] = ()  # the job does not fit its queue (also in the header)
    exclusive: bool = False  # it takes every GPU of its nodes: whole nodes (Slurm --exclusive)
    gpu_product: str | None = None  # Kubernetes: the nvidia.com/gpu.product node label to select
    ipc_lock: bool = False  # Kubernetes: add IPC_LOCK (the target's jobs.ipc_lock)
    ttl_after_finished_s: int = 86400  # Kubernetes: a finished Job is deleted after this


# File systems every node of a site reads as one (the node-side smoke keeps the same list:
# envbuild/smoke/collective.py SHARED_FS, compared by a test): a pack is never unpacked there.
SHARED_FS = ("nfs", "nfs4", "lustre", "gpfs", "cifs", "smb", "ceph", "beegfs", "fuse.")
# An image mounted on the node (squashfuse, or the kernel's squashfs) is the node's own, even
# when its file lies on a shared file system: its files are looked up in the image, not there.
NODE_IMAGE_FS = ("fuse.squashfuse", "squashfs")
UMOUNT = "fusermount3 -u {0} 2>/dev/null || fusermount -u {0} 2>/dev/null || umount {0}"


def unpack_script(p: PackedEnv, fetch: bool = False) -> tuple[str, str, str]:
    """``(parent, copy, script)`` for one node and the pack ``p``: the script (sh, every path a
    quoted word; the sha256 is hex, checked by ``envpack.read``) refuses a parent folder on a
    shared file system (every node would replace the one copy the others read), checks the
    node's copy at ``copy`` against the pack's sha256, and only then unpacks it at the prefix
    (a tarball: ``tar -I zstd`` for a tar.zst, a node without the zstd program failing before its
    prefix is touched; ``tar -xz`` for a tar.gz) or leaves it there for the task to mount (a
    squashfs image: ``mount_lines``; a node without squashfuse fails here, before any task); a failure removes the copy and
    exits 1 naming the node. The prefix is replaced only where it is absent, an empty folder,
    or a prefix envbuild made and marked (``replaceable_test``: its own ``.envbuild`` folder):
    a pack's manifest names the path, and a manifest never chooses what a node deletes.
    ``fetch``: the node first copies the pack from where the job reads it (``p.archive``) to
    ``copy`` itself (PBS: no sbcast)."""
    prefix = p.prefix.rstrip("/")
    parent = str(Path(prefix).parent)
    copy = p.node_copy()
    shared = "|".join(k + "*" for k in SHARED_FS)
    script = (f'set -eu; fs="$(stat -f -c %T {q(parent)})"; case "$fs" in '
              f'{shared}) '
              f'echo "envbuild: $(hostname):" {q(parent)} '
              f'"is on a shared file system ($fs): a pack unpacks on a node\'s own disk" >&2; '
              f'rm -f {q(copy)}; exit 1;; esac; '
              + (f'cp -- {q(p.archive)} {q(copy)}; ' if fetch else "")
              + f'if ! echo {q(p.sha256 + "  " + copy)} | sha256sum -c --status -; then '
              f'echo "envbuild: $(hostname): the copy of the pack does not match its sha256 {p.sha256}" >&2; '
              f'rm -f {q(copy)}; exit 1; fi; '
              f'if ! {{ {replaceable_test(prefix)}; }}; then '
              f'echo "envbuild: $(hostname):" {q(prefix)} "holds files envbuild did not make (no .envbuild folder): '
              f'left as it is, the pack not unpacked" >&2; rm -f {q(copy)}; exit 1; fi; ')
    if p.image:
        script += (f'if ! command -v squashfuse >/dev/null; then echo "envbuild: $(hostname): no squashfuse to mount the '
                   f'image (install squashfuse, or pack a .tar.gz)" >&2; rm -f {q(copy)}; exit 1; fi; '
                   f'{UMOUNT.format(q(prefix))} 2>/dev/null || true; rm -rf {q(prefix)}; mkdir -p {q(prefix)}; '
                   f'echo "envbuild: $(hostname) checked the image (sha256 {p.sha256[:16]}); the task mounts it at" '
                   f'{q(prefix)}')
    else:
        if p.format == "tar.zst":  # checked before the prefix is touched, as squashfuse is
            script += ('if ! command -v zstd >/dev/null; then echo "envbuild: $(hostname): no zstd to unpack the pack '
                       f'(install zstd, or pack a .tar.gz)" >&2; rm -f {q(copy)}; exit 1; fi; ')
        untar = "tar -I zstd -xf" if p.format == "tar.zst" else "tar -xzf"
        script += (f'rm -rf {q(prefix)}; mkdir -p {q(prefix)}; {untar} {q(copy)} -C {q(prefix)}; rm -f {q(copy)}; '
                   f'echo "envbuild: $(hostname) checked the pack (sha256 {p.sha256[:16]}) and unpacked it at" '
                   f'{q(prefix)}')
    return parent, copy, script


def replaceable_test(prefix: str) -> str:
    """A sh condition, true where a node may replace ``prefix`` (rm -rf): the path is absent,
    an empty folder, or a folder envbuild made and marked (it holds a ``.envbuild`` folder, not
    a link: every provisioned or unpacked prefix has one, with its lock, state and env.sh).
    A link, a file, or a folder of someone's data is never replaced."""
    p, mark = q(prefix), q(prefix + "/.envbuild")
    return (f'{{ ! [ -e {p} ] && ! [ -L {p} ]; }} || {{ [ -d {p} ] && ! [ -L {p} ] && '
            f'{{ {{ [ -r {p} ] && [ -z "$(ls -A -- {p})" ]; }} || {{ [ -d {mark} ] && ! [ -L {mark} ]; }}; }}; }}')


def mount_lines(p: PackedEnv) -> list[str]:
    """Task-script lines for a squashfs pack: squashfuse mounts the node's checked copy read-only
    at the prefix for this task (in the task's own step, so the scheduler does not end the mount
    with an earlier step); when the task exits, with its own status kept, the mount is undone
    (lazily if a straggler still holds it) and the copy removed."""
    prefix, copy = q(p.prefix.rstrip("/")), q(p.node_copy())
    return ["# the environment's squashfs image (envbuild pack), its copy checked on this node: mounted",
            "# read-only at the prefix for this task, unmounted and removed when the task exits",
            f"squashfuse {copy} {prefix}",
            f'envbuild_unmount() {{ rc=$?; cd /; {UMOUNT.format(prefix)} 2>/dev/null || umount -l {prefix} || '
            f'echo "envbuild: $(hostname): could not unmount" {prefix} >&2; rm -f {copy}; exit "$rc"; }}',
            "trap envbuild_unmount EXIT",
            f'echo "envbuild: $(hostname) mounted the image at" {prefix}']


def path_word(path: str) -> str:
    """A shell word for a plan path: ``~/x`` -> ``"$HOME"/x`` (a quoted ~ would not expand)."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + q(path[2:])
    return q(path)


def template_word(template: str, values: dict[str, str]) -> str:
    """One shell word from an argv template: literal parts quoted, ``{cwd}``-style fields
    replaced by path words, ``$ENVBUILD_*`` kept as double-quoted expansions."""
    out: list[str] = []
    pos = 0
    tokens = sorted([(m.start(), m.end(), "field", m.group(1)) for m in FIELD.finditer(template)]
                    + [(m.start(), m.end(), "var", m.group(1)) for m in VAR.finditer(template)])
    for start, end, kind, name in tokens:
        if start > pos:
            out.append(q(template[pos:start]))
        if kind == "var":
            out.append(f'"${{{name}}}"')
        elif name not in values:
            raise InputError(f"the launch needs {{{name}}}, which the plan does not have",
                             hint="plan with the recipe's git sources (envbuild plan RECIPE ...)")
        else:
            out.append(values[name])
        pos = end
    if pos < len(template) or not out:
        out.append(q(template[pos:]))
    return "".join(out)


def fill_command(command: str, sources: dict[str, str]) -> str:
    """The recipe's command (shell text written by the recipe author) with ``{sources.X}``
    replaced by the plan's checkout paths as quoted words."""
    def sub(m: re.Match) -> str:
        name = m.group(1)
        if name not in sources:
            raise InputError(f"the benchmark command names {{sources.{name}}}, not a checkout of the plan",
                             hint="plan the recipe with its git sources")
        return path_word(sources[name])
    return re.sub(r"\{sources\.([A-Za-z0-9_.-]+)\}", sub, command)


def _sources(plan) -> dict[str, str]:
    return {s.params.name: s.params.dest for s in plan.sources()}


def _env_file(plan) -> str | None:
    """The env file the plan writes; None for a container node plan (its image sets the
    environment: the job runs inside it)."""
    env_file = plan.env_file()
    if env_file is None and plan.image() is not None:
        return None
    if env_file is None:
        raise InputError(f"the plan for {plan.recipe} has no env-file step",
                         hint="plan it again with this envbuild (envbuild plan ... --json)")
    return env_file.params.path


def _smoke_dir(plan) -> str | None:
    smoke = plan.smoke()
    return smoke.params.dir if smoke is not None else None


def _module(plan) -> str | None:
    env = plan.environment()
    return env.params.conda_module if env is not None else None


def _check_scheduler(opts: LaunchOptions, target) -> None:
    if opts.scheduler not in SCHEDULERS:
        raise InputError(f"unknown scheduler {opts.scheduler!r}", hint="use one of: " + ", ".join(SCHEDULERS))
    native = TARGET_SCHEDULER.get(target.scheduler or "")
    if native and opts.scheduler not in (native, "local"):
        raise InputError(f"target {target.name} runs its jobs through {target.scheduler}, not {opts.scheduler}",
                         hint=f"use --scheduler {native} (or local, to run on this node)")


def _job_settings(opts: LaunchOptions, target) -> tuple[LaunchOptions, tuple[str, ...]]:
    """The account and queue a job is submitted with, when it goes through the target's own
    scheduler: the flags win, then the target profile's ``jobs`` defaults. Refuses a job still
    without what ``jobs.requires`` names (the site's scheduler would reject it), naming the
    flags and the site's source. Returns the options with the values filled in, and header
    lines saying which came from the profile."""
    flags = {"account": opts.account, "queue": opts.partition}
    for k, value in flags.items():  # the profile's values are checked by its schema (JobWord)
        if value and not SAFE_PATH.match(value):
            raise InputError(f"{JOB_FLAGS[k][0]} {value!r} has characters a scheduler directive cannot hold",
                             hint="use a name of letters, digits and ._-")
    if opts.scheduler != TARGET_SCHEDULER.get(target.scheduler or ""):
        return opts, ()
    jobs = target.jobs
    values = {k: v or getattr(jobs, k) for k, v in flags.items()}
    # a queue the profile lists is chosen for the job (envbuild.launch.queues) when none is named
    missing = [k for k in JOB_FLAGS if k in jobs.requires and not values[k] and not (k == "queue" and jobs.queues)]
    if missing:
        raise InputError(f"{target.scheduler} on {target.name} refuses a job without "
                         + " and ".join(JOB_FLAGS[k][2] for k in missing),
                         hint=f"pass {' '.join(f'{JOB_FLAGS[k][0]} {JOB_FLAGS[k][1]}' for k in missing)}, or set "
                         + ", ".join(f"jobs.{k}" for k in missing) + " in your own copy of the target file"
                         + (f" ({jobs.source})" if jobs.source else ""))
    header = tuple(f"{k} {values[k]}: from the target profile (jobs.{k})" for k in JOB_FLAGS
                   if values[k] and not flags[k] and k != "queue")  # the queue's: queues.choose_queue
    return replace(opts, account=values["account"], partition=values["queue"]), header


def _variant_command(recipe, variant: str | None) -> str:
    bench = recipe.benchmark
    if bench is None or not bench.command:
        raise InputError(f"recipe {recipe.name} has no benchmark command to launch",
                         hint="add benchmark.command to the recipe")
    if variant is None:
        return bench.command
    if variant not in bench.variants:
        known = sorted(bench.variants) + sorted(k for k, r in recipe.run.items() if r.launcher == "pods")
        raise InputError(f"recipe {recipe.name} has no variant {variant!r}",
                         hint="variants: " + (", ".join(known) or "none (leave --variant out)"))
    return bench.variants[variant]


def _counts(prog: Run | None, variant: str | None, opts: LaunchOptions, target, recipe) -> tuple[int, int]:
    nodes = opts.nodes or (prog.nodes if prog else 1)
    if nodes < 1:
        raise InputError("--nodes must be at least 1")
    if prog and not (opts.smoke_only or opts.command_override):
        if nodes < prog.min_nodes or (prog.max_nodes is not None and nodes > prog.max_nodes):
            span = f"{prog.min_nodes}" + ("+" if prog.max_nodes is None else
                                         f"..{prog.max_nodes}" if prog.max_nodes != prog.min_nodes else "")
            fits = [name for name, p in recipe.run.items() if name not in ("default", variant)
                    and p.min_nodes <= nodes and (p.max_nodes is None or nodes <= p.max_nodes)]
            raise InputError(f"{recipe.name}{' ' + variant if variant else ''} runs on {span} node(s), "
                             f"not {nodes}", hint=(f"use --variant {fits[0]} for {nodes} nodes; " if fits else "")
                             + f"{prog.why} ({prog.source})")
    target_gpus = target.gpus.count if target.gpus else 0
    fixed = prog.gpus_per_node if prog else None  # 0 is said too: a CPU program asks for no GPU
    if opts.gpus_per_node is not None:
        gpus = opts.gpus_per_node
    elif fixed is not None:
        gpus = fixed
    else:
        gpus = target_gpus or (recipe.benchmark.needs_gpus if recipe.benchmark else 0)
    if gpus < 0:
        raise InputError("--gpus-per-node must be 0 or more")
    if prog and not (opts.smoke_only or opts.command_override):
        if fixed is not None and gpus != fixed:
            raise InputError(f"the published command of {recipe.name}{' ' + variant if variant else ''} "
                             f"runs {fixed} GPU(s) per node, not {gpus}",
                             hint="pick the variant for that GPU count, or leave --gpus-per-node out")
        total = gpus * nodes
        if prog.total_gpus and total not in prog.total_gpus:
            raise InputError(f"{recipe.name} has no configuration for {total} GPUs",
                             hint=f"it has: {', '.join(map(str, prog.total_gpus))} ({prog.source})")
        if total % prog.gpu_multiple:
            raise InputError(f"{total} GPUs cannot hold the model parallel layout of {recipe.name} "
                             f"(a multiple of {prog.gpu_multiple} is needed)", hint=prog.why)
    return nodes, gpus


@dataclass(frozen=True)
class _Work:
    """What the job's tasks run and where: the recipe's training command, or what replaces it."""

    mode: str
    commands: tuple[str, ...]
    cwd: str
    nproc: int
    parser: str
    metric: str | None
    files: dict[str, str]
    notes: tuple[str, ...]
    shown: tuple[str, ...] | None = None  # the command as published, where commands wraps it
    replaced: str | None = None  # why the training command is not the recipe's


MODES = {"once": "once", "deepspeed": "once", "torchrun": "per-node", "per-node": "per-node", "pods": "pods"}


def build_job(recipe, target, plan, opts: LaunchOptions) -> Job:
    """Decide the launch of ``recipe`` on ``target`` from ``plan`` (``envbuild.plan.model.Plan``)."""
    _check_scheduler(opts, target)
    given_queue = opts.partition
    opts, from_profile = _job_settings(opts, target)
    _check_options(opts)
    variant = opts.variant
    command = _published_command(recipe, opts)
    prog = recipe.run_of(variant)
    nodes, gpus = _counts(prog, variant, opts, target, recipe)
    opts, scheduling, warnings = _walltime_and_queue(opts, given_queue, recipe, target, nodes)
    sources = _sources(plan)
    env_file = _env_file(plan)
    smoke_dir = _smoke_dir(plan)
    launcher = _launcher(recipe, prog, opts, nodes)
    cwd = _bench_cwd(recipe.benchmark, smoke_dir or plan.prefix, sources)
    env = _task_env(recipe, target, sources)
    work = _training(recipe, prog, launcher, command, sources, cwd, gpus)
    if opts.smoke_only or opts.command_override:
        work = _replaced(work, opts, smoke_dir, nodes, gpus)
    files, notes = dict(work.files), list(work.notes)
    address_var = None
    if prog and prog.address_var and nodes > 1 and not (opts.smoke_only or opts.command_override):
        address_var = prog.address_var
        files[ADDRESS_SCRIPT] = ADDRESS_SOURCE.read_text()
        notes.append(f"{address_var}: every rank's InfiniBand address, found by each node when it starts "
                     f"($JOB_DIR/{ADDRESS_SCRIPT}: its first active InfiniBand/RoCE port's IPv4 address, "
                     "gathered by node 0 over TCP and handed to every node in rank order)")
    if prog and prog.source:
        notes.append(f"source: {prog.source}")
    container, container_notes = _container(recipe, target, plan, opts)
    # the recipe's image holds no copy of data without a recorded sha256: its prepare.sh fetches
    # it (and runs the steps that read it) in each container before the training command
    prepare = (prepare_script(plan) if container and recipe.environment.kind == "container"
               and not opts.no_container and not opts.smoke_only else None)
    stage = stage_name(plan)
    notes += [*container_notes, *_data_notes(prepare, stage, opts.scheduler), *_ipc_lock_notes(opts, target)]
    header = _header(recipe, target, plan, opts, nodes, gpus, (*from_profile, *scheduling), warnings)
    return Job(recipe=recipe.name, target=target.name, scheduler=opts.scheduler, variant=variant,
               name=f"envbuild-{recipe.name}", nodes=nodes, gpus_per_node=gpus, nproc_per_node=work.nproc,
               mode=work.mode, commands=work.commands, env_file=env_file, cwd=work.cwd,
               env=env, module=_module(plan),
               container_image=container, files=files, notes=tuple(notes), replaced=work.replaced,
               parser=work.parser, metric=work.metric, output_dir=opts.output_dir,
               cpus_per_task=prog.cpus_per_task if prog else None, cpu_cores=target.cpu_cores,
               memory_gib=target.memory_gib, shm_size=target.shm_size, infiniband=bool(target.infiniband),
               scheduler_options=(tuple(prog.scheduler_options.get(opts.scheduler, ())) if prog else ()),
               master_port=opts.master_port or (prog.master_port if prog else None),
               address_var=address_var, prepare=prepare, stage=stage, header=header, options=opts,
               packed=_packed(opts, plan, target, _needs(plan, recipe, opts, command, smoke_dir)),
               fanout=opts.fanout or sbcast_fanout(nodes), warnings=warnings,
               exclusive=bool(gpus and target.gpus and gpus >= target.gpus.count),
               gpu_product=gpu_product_label(target) if gpus else None, ipc_lock=target.jobs.ipc_lock,
               ttl_after_finished_s=target.jobs.ttl_after_finished_s)


def _check_options(opts: LaunchOptions) -> None:
    """Options that contradict each other or that a scheduler directive cannot hold."""
    if opts.smoke_only and opts.command_override:
        raise InputError("give --smoke-only or --command-override, not both")
    if not SAFE_PATH.match(opts.output_dir):
        raise InputError(f"output folder {opts.output_dir!r} has characters a scheduler directive cannot hold",
                         hint="use a path of letters, digits and ./_-")


def _published_command(recipe, opts: LaunchOptions) -> str:
    """The recipe's benchmark command for the chosen variant; "" for a Kubernetes layout of pods
    (each pod runs a variant of its own: ``_training``), which only ``--scheduler k8s`` launches."""
    row = recipe.run_of(opts.variant)
    if row is not None and row.launcher == "pods":
        if opts.scheduler != "k8s":
            raise InputError(f"variant {opts.variant} is a Kubernetes layout", hint="use --scheduler k8s")
        return ""
    return _variant_command(recipe, opts.variant)


def _launcher(recipe, prog: Run | None, opts: LaunchOptions, nodes: int) -> str:
    """How the ranks start (the recipe's run row; a per-node launch on one node is one start).
    Refuses more than one node for a recipe without a multi-node launch, unless its command is
    replaced."""
    launcher = prog.launcher if prog else "once"
    if launcher == "per-node" and nodes == 1:
        launcher = "once"
    if prog is None and nodes > 1 and not (opts.smoke_only or opts.command_override):
        raise InputError(f"{recipe.name} starts its own ranks on one node; it has no multi-node launch here",
                         hint="leave --nodes out")
    return launcher


def _bench_cwd(bench, default: str, sources: dict[str, str]) -> str:
    """The benchmark's folder (``{sources.X}`` filled in), else ``default``."""
    cwd = bench.cwd if bench and bench.cwd else default
    return re.sub(r"\{sources\.([A-Za-z0-9_.-]+)\}", lambda m: sources.get(m.group(1), m.group(0)), cwd)


def _task_env(recipe, target, sources: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The variables every task exports (name, shell word): the benchmark's own, and those it
    takes from the target profile, which must define them."""
    bench = recipe.benchmark
    source_words = {f"sources.{k}": path_word(v) for k, v in sources.items()}
    env = {k: template_word(str(v), source_words) for k, v in (bench.env if bench else {}).items()}
    missing = [n for n in (bench.target_env if bench else []) if n not in target.env]
    if missing:
        raise InputError(f"target {target.name} does not define {', '.join(missing)}, which {recipe.name} needs",
                         hint="set them in the target profile's env")
    target_env = {n: q(target.env[n]) for n in (bench.target_env if bench else [])}
    return tuple(sorted({**env, **target_env}.items()))


def _training(recipe, prog, launcher: str, command: str, sources: dict[str, str], cwd: str, gpus: int) -> _Work:
    """The recipe's training command as its launcher starts it (``prog``: the recipe's run row,
    which every launcher but "once" has): a command per pod, deepspeed or torchrun over the run
    row's argv, or the published command (with its multi-node arguments) with its output
    captured on stdout."""
    bench = recipe.benchmark
    mode = MODES[launcher]
    values = {"cwd": path_word(cwd), "job_dir": '"${JOB_DIR}"'}
    notes: list[str] = []
    cmds: tuple[str, ...]
    shown: tuple[str, ...] | None = None
    if launcher == "pods":
        cmds = tuple((f"{prog.pod_setup} && " if prog.pod_setup else "") + fill_command(_variant_command(recipe, v), sources)
                     for v in prog.pod_commands)
        notes.append(f"pods: {prog.why}")
    elif launcher in ("deepspeed", "torchrun"):
        words = " ".join(template_word(w, values) for w in prog.argv)
        if launcher == "deepspeed":
            cmds = (f'deepspeed --num_gpus "$ENVBUILD_GPUS_PER_NODE" {words}',)
        else:
            cmds = (_torchrun("torchrun", words),)
        notes.append(f"{launcher}: {prog.why}")
    else:
        text = fill_command(command, sources)
        if launcher == "per-node":
            text += " " + " ".join(template_word(w, values) for w in prog.multi_node_args)
        shown = (text,)
        # the training output on stdout, in the foreground (a trace file, a backgrounded job)
        cmds = (capture(prog.output if prog else None, text),)
        if prog:
            notes.append(f"{launcher}: {prog.why}")
    return _Work(mode=mode, commands=cmds, cwd=cwd, nproc=max(gpus, 1),
                 parser=bench.parser if bench and bench.parser else "", metric=bench.metric if bench else None,
                 files=dict(prog.files) if prog else {}, notes=tuple(notes), shown=shown)


def _replaced(work: _Work, opts: LaunchOptions, smoke_dir: str | None, nodes: int, gpus: int) -> _Work:
    """``--smoke-only`` (envbuild's CPU all-reduce over every rank) or ``--command-override`` in
    place of the training command: said in the job's notes, with the command it replaces."""
    original = " / ".join(work.shown or work.commands)
    original = original if len(original) <= 100 else original[:97] + "..."
    cmds: tuple[str, ...]
    if opts.smoke_only:
        if smoke_dir is None:
            raise InputError("--smoke-only needs the plan's smoke step (its scripts are copied to the node)",
                             hint="plan with the smoke step")
        nproc = gpus if gpus else 2
        replaced = (f"--smoke-only: the training command ({original}) is replaced by envbuild's CPU smoke, "
                    f"an all-reduce over {nodes} node(s) x {nproc} rank(s) (collective.py, gloo)")
        script = path_word(smoke_dir.rstrip("/") + "/collective.py")
        if opts.scheduler == "pbs":
            mode, cmds = "per-rank", (f"python {script} --json --device cpu",)
        else:
            mode = "pods" if opts.scheduler == "k8s" else "per-node"
            cmds = (_torchrun("python -m torch.distributed.run", f"{script} --json --device cpu"),)
            cmds = cmds * (nodes if mode == "pods" else 1)
        return replace(work, mode=mode, commands=cmds, cwd=smoke_dir, nproc=nproc, parser=SMOKE_PARSER,
                       metric="max_busbw_gbps", files={}, notes=(replaced,), replaced=replaced)
    replaced = (f"--command-override: the training command ({original}) is replaced by "
                f"{opts.command_override!r}, as asked")
    mode = "pods" if opts.scheduler == "k8s" else ("once" if nodes == 1 else "per-node")
    cmds = (opts.command_override,) * (nodes if mode == "pods" else 1)
    return replace(work, mode=mode, commands=cmds, files={}, notes=(replaced,), replaced=replaced)


def _container(recipe, target, plan, opts: LaunchOptions) -> tuple[str | None, list[str]]:
    """The image the tasks run in (the recipe's container on Slurm and Kubernetes, unless
    ``--no-container``; else ``--image``), and notes on it. Refuses an image pyxis would pull
    from a registry by mistake, and a Kubernetes job without an image a pod can pull."""
    notes: list[str] = []
    container = None
    if recipe.environment.kind == "container" and opts.scheduler in ("slurm", "k8s"):
        if opts.no_container:
            notes.append("--no-container: the recipe's container is not used; the plan's environment "
                         "is sourced on the node itself")
        else:
            # the plan's enroot import (image-import step: <prefix>/envbuild-<recipe>-<target>.sqsh)
            # is the file pyxis runs, not a name relative to the job's folder
            image_import = plan.image_import()
            imported = image_import.params.path if image_import is not None else None
            if opts.scheduler == "k8s" and not opts.container_image:
                tag = default_image(recipe.name, target.name, "k8s")
                raise InputError(f"a Kubernetes pod pulls its image from a registry; {tag} is only the local "
                                 "tag of the image envbuild builds", hint=push_hint(recipe.name, target.name))
            container = opts.container_image or (imported if opts.scheduler == "slurm" else None) \
                or default_image(recipe.name, target.name, opts.scheduler, plan.prefix)
            if opts.scheduler == "k8s":
                notes.append(f"image: {container}, the image envbuild builds for {recipe.name} on {target.name}, "
                             "pushed there before kubectl apply (" + push_hint(recipe.name, target.name) + ")")
    elif opts.container_image:
        container = opts.container_image
    if container and opts.scheduler == "slurm" and (problem := pyxis.image_problem(container)):
        raise InputError(problem, hint=f"name the file by its path: --image ./{container} "
                         f"(relative to the job's folder) or an absolute path ({pyxis.SOURCE})")
    if opts.scheduler == "k8s" and container is None:
        raise InputError(f"a Kubernetes pod needs an image; {recipe.name}'s environment is a {recipe.environment.kind}",
                         hint="pass --image IMAGE (an image with the environment built in)")
    return container, notes


def _data_notes(prepare: str | None, stage: str, scheduler: str) -> list[str]:
    """What the image's prepare.sh does in the job: once per job on Slurm, else in each container."""
    if prepare and scheduler == "slurm":
        return [f"data: {prepare} --stage $JOB_DIR/{stage} runs once per job in one container: it "
                "fetches the data files the image does not hold (no sha256 in the recipe; the first "
                "fetch's digest is printed), runs the steps that read them and keeps what they wrote with "
                "its SHA256SUMS (a later job of the same image whose folder still holds reuses it; the "
                "folder is named for the image's plan); every task then copies it into its container "
                "(--from), each file checked: no compute node fetches anything"]
    if prepare:
        return [f"data: {prepare} runs first in each container: it fetches the data files the image "
                "does not hold (no sha256 in the recipe; the first fetch's digest is printed) and runs "
                "the steps that read them"]
    return []


def _ipc_lock_notes(opts: LaunchOptions, target) -> list[str]:
    """Why a Kubernetes pod on an InfiniBand target goes without IPC_LOCK, unless the target adds it."""
    if opts.scheduler == "k8s" and target.infiniband and not target.jobs.ipc_lock:
        return ["IPC_LOCK is not added (the Pod Security baseline level refuses it): RDMA memory "
                "registration then relies on the locked-memory limit the container runtime gives the pod "
                "(`ulimit -l` in a pod shows it); set jobs.ipc_lock in your copy of the target for a namespace "
                "at the privileged level"]
    return []


def _header(recipe, target, plan, opts: LaunchOptions, nodes: int, gpus: int, settings: tuple[str, ...],
            warnings: tuple[str, ...]) -> tuple[str, ...]:
    """The job script's header: what is launched where, what rendered it from which plan, how the
    settings were chosen (``settings``), the warnings, and the command that renders it again."""
    variant = opts.variant
    return (f"envbuild launch: {recipe.name} on {target.name} through {opts.scheduler}"
            + (f" (variant {variant})" if variant else "") + f", {nodes} node(s) x {gpus} GPU(s)",
            f"rendered by envbuild {__version__} from the plan for {plan.host} (facts {plan.facts_origin}; "
            f"lock digest {plan.lock_digest or 'none'})",
            *settings, *(f"WARNING: {w}" for w in warnings),
            *([f"regenerate: {opts.regenerate}"] if opts.regenerate else []))


def gpu_product_label(target) -> str | None:
    """The ``nvidia.com/gpu.product`` value NVIDIA's GPU feature discovery gives the target's
    GPUs (the product name with spaces as ``-``: NVIDIA-GeForce-RTX-4090), or the target's own
    ``jobs.gpu_product``."""
    if target.jobs.gpu_product:
        return target.jobs.gpu_product
    if target.gpus is None:
        return None
    label = re.sub(r"\s+", "-", target.gpus.model.strip())
    return label if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}", label) else None


def _walltime_and_queue(opts: LaunchOptions, given_queue: str | None, recipe, target,
                        nodes: int) -> tuple[LaunchOptions, tuple[str, ...], tuple[str, ...]]:
    """The job's wall time (``--time``, else from the recipe's expected time) and, on the
    target's own batch scheduler, its queue from the profile's limits (``envbuild.launch.queues``):
    the options filled in, header lines saying how, and warnings."""
    if opts.scheduler == "local":
        return opts, (), ()
    header: list[str] = []
    walltime = opts.time_limit
    if walltime is None:
        walltime, why = default_walltime(recipe, opts.smoke_only)
        header.append(f"time {walltime}: {why}")
    elif not re.fullmatch(WALLTIME, walltime):
        raise InputError(f"--time {walltime!r} is not HH:MM:SS", hint="e.g. --time 00:30:00")
    opts = replace(opts, time_limit=walltime)
    if opts.scheduler == "k8s":
        return _k8s_settings(opts, target), tuple(header), ()
    if opts.scheduler not in ("slurm", "pbs"):
        return opts, tuple(header), ()
    native = opts.scheduler == TARGET_SCHEDULER.get(target.scheduler or "")
    jobs = target.jobs
    choice = (choose_queue(given_queue, jobs.queue, jobs.queues, nodes, walltime, jobs.source) if native
              else QueueChoice(given_queue))
    return replace(opts, partition=choice.queue), (*header, *choice.header), choice.warnings


def _k8s_settings(opts: LaunchOptions, target) -> LaunchOptions:
    """The namespace, Kueue queue and RDMA resource of a Kubernetes job: the flags, then the
    target's ``jobs`` (a site's names), then envbuild's defaults (namespace ``envbuild``, never
    the shared ``default``; the RDMA shared device plugin's example resource)."""
    jobs = target.jobs
    for flag, value in (("--namespace", opts.namespace), ("--kueue-queue", opts.kueue_queue)):
        if value is not None and not re.match(DNS_LABEL, value):
            raise InputError(f"{flag} {value!r} is not a Kubernetes name (RFC 1123 label)",
                             hint="lower-case letters, digits and -, at most 63")
    return replace(opts, namespace=opts.namespace or jobs.namespace or DEFAULT_NAMESPACE,
                   kueue_queue=opts.kueue_queue or jobs.kueue_queue,
                   rdma_resource=jobs.rdma_resource or opts.rdma_resource)



def _needs(plan, recipe, opts: LaunchOptions, command: str, smoke_dir: str | None) -> dict[str, str]:
    """The plan steps whose results in the prefix the job reads (step id -> what): the
    environment file; envbuild's smoke scripts for --smoke-only or a benchmark that is
    envbuild's smoke run in their folder (a prefix provisioned with --no-smoke has none); the
    checkout of each source the benchmark's command, folder or environment names."""
    env_file = plan.env_file()
    needs = {env_file.id: f"the environment file {env_file.params.path}"} if env_file is not None else {}
    bench = recipe.benchmark
    runs_smoke = bench is not None and not bench.cwd and bench.parser == SMOKE_PARSER
    if opts.smoke_only or (runs_smoke and not opts.command_override):
        where = f" in {smoke_dir}" if smoke_dir else ""
        needs["smoke"] = f"envbuild's smoke scripts (gpt.py, collective.py){where}"
    if bench is not None and not (opts.smoke_only or opts.command_override):
        prog = recipe.run_of(opts.variant)
        text = " ".join([command, bench.cwd or "", *map(str, bench.env.values()), *(prog.argv if prog else [])])
        needs.update({s.id: f"the checkout of {s.params.name} ({s.params.dest})" for s in plan.sources()
                      if "{sources." + s.params.name + "}" in text})
    return needs


def _packed(opts: LaunchOptions, plan, target, needs: dict[str, str] | None = None) -> PackedEnv | None:
    """The pack to distribute, checked against the plan: it unpacks at its own prefix only, on
    a node's own disk (a shared prefix is used where it is), and holds what the job reads
    (``needs``: a step whose marker its manifest lacks was never finished in the packed prefix,
    so the job would find it missing on every node, after the queue)."""
    if opts.packed is None:
        return None
    if opts.fanout and opts.scheduler != "slurm":
        raise InputError(f"--fanout is sbcast's (Slurm); on {opts.scheduler} each node copies the pack itself",
                         hint="drop --fanout")
    if target.shared_prefix:
        raise InputError(f"target {target.name} has a shared prefix: every node uses it where it is",
                         hint="leave --packed out, or give a target whose prefix is on each node's own disk")
    if opts.scheduler not in ("slurm", "pbs"):
        raise InputError(f"--packed reaches the nodes through Slurm's sbcast or PBS's mpiexec; {opts.scheduler} "
                         "has no path for it yet",
                         hint="leave --packed out (each node uses the environment provisioned on it)")
    if opts.packed.prefix.rstrip("/") != plan.prefix.rstrip("/"):
        raise InputError(f"the pack holds the environment of {opts.packed.prefix}; this plan's prefix is {plan.prefix}",
                         hint="a pack unpacks at the path it was made at (a venv is not relocatable): provision "
                              f"this plan's environment and pack that one (envbuild pack --prefix {plan.prefix} -o PACK)")
    missing = [f"{what} (step {sid})" for sid, what in (needs or {}).items() if sid not in opts.packed.steps]
    if missing:
        raise InputError(f"the pack {opts.packed.archive} lacks what this launch reads: " + "; ".join(missing)
                         + ": its manifest has no marker of " + ("that step" if len(missing) == 1 else "those steps"),
                         hint="provision the prefix with them (the smoke step: without --no-smoke), then envbuild pack "
                              "it again; nothing was submitted")
    return opts.packed


def _torchrun(launcher: str, program: str) -> str:
    return (f'{launcher} --nnodes "$ENVBUILD_NNODES" --nproc_per_node "$ENVBUILD_NPROC_PER_NODE" '
            '--rdzv_id "$ENVBUILD_JOB_ID" --rdzv_backend c10d '
            f'--rdzv_endpoint "$ENVBUILD_MASTER_ADDR:$ENVBUILD_MASTER_PORT" {program}')


def default_image(recipe: str, target: str, scheduler: str, prefix: str | None = None) -> str:
    """The image envbuild builds for the recipe (``envbuild/<recipe>:<target>``, as the CI
    workflow tags it); for pyxis the enroot import of it in the plan's ``prefix``, an absolute
    path (pyxis pulls a bare name from a registry: ``envbuild.launch.pyxis``)."""
    if scheduler == "slurm":
        if not prefix:
            raise ValueError("a Slurm image is the enroot import in the plan's prefix: give the prefix")
        return sqsh_path(prefix, recipe, target)
    return f"envbuild/{recipe}:{target}"


def push_hint(recipe: str, target: str) -> str:
    """How the image a pod runs gets into a registry: build it from envbuild's render, push it."""
    tag = default_image(recipe, target, "k8s")
    return (f"build it with `envbuild render {recipe} -t {target} --format dockerfile -o ctx && podman build "
            f"-t {tag} ctx`, push it with `podman push {tag} REGISTRY/{tag}`, then pass --image REGISTRY/{tag}")


def task_script(job: Job, prelude: list[str], command: str | None = None, *, staged: str | None = None) -> str:
    """The script every task runs: scheduler ``prelude`` (rank variables), the module, the
    plan's env file, the recipe's environment variables, ``cd`` and the command (``command``,
    else the job's only one). ``staged``: the folder (a shell word) where the job prepared the
    image's run-time data once; each task copies it from there instead of fetching it."""
    lines = ["#!/usr/bin/env bash", f"# task of {job.name}: the plan's environment, then the command",
             "set -euo pipefail", *prelude]
    if job.packed is not None and job.packed.image:
        lines += mount_lines(job.packed)
    if job.module:  # a batch shell may lack the module function: the login profile defines it
        lines += ["# shellcheck source=/dev/null", "type module > /dev/null 2>&1 || . /etc/profile",
                  f"module load {q(job.module)}"]
    if job.env_file:
        lines += ["# the environment file the plan's env-file step writes",
                  "# shellcheck source=/dev/null", f". {path_word(job.env_file)}"]
    else:
        lines += ["# the environment is the container image's own (built from the plan)"]
    lines += [f"export {k}={v}" for k, v in job.env]
    if job.prepare and staged:
        lines += ["# data the image does not hold, prepared once for the job: copied here, sha256 checked",
                  f"sh {path_word(job.prepare)} --from {staged}"]
    elif job.prepare:
        lines += ["# data the image does not hold (no recorded sha256): fetched and prepared in this container",
                  f"sh {path_word(job.prepare)}"]
    lines.append(f"cd {path_word(job.cwd)}")
    if job.replaced:
        lines += say(job.replaced, ">&2")
    lines.append(command if command is not None else job.commands[0])
    return "\n".join(lines) + "\n"


def say(text: str, redirect: str = "") -> list[str]:
    """``echo`` a note (one quoted word: a ``$`` in it is printed, not expanded)."""
    word = q("envbuild: " + text)
    return (["# shellcheck disable=SC2016  # printed as written"] if "$" in word or "`" in word else []) \
        + [f"echo {word}" + (f" {redirect}" if redirect else "")]


def heredoc(path_expr: str, content: str) -> list[str]:
    """Lines that write ``content`` exactly to ``path_expr`` (a shell word, may expand
    ``$JOB_DIR``): a quoted heredoc whose delimiter is not a line of the content."""
    if not content.endswith("\n"):
        content += "\n"
    delim = heredoc_delimiter(content)
    return [f"cat > {path_expr} <<'{delim}'", *content[:-1].split("\n"), delim]


def variables(job: Job, values: dict[str, str]) -> list[str]:
    """``export ENVBUILD_*`` lines (values are shell words already) in a stable order."""
    return [f"export {k}={values[k]}" for k in ("ENVBUILD_JOB_ID", "ENVBUILD_NNODES", "ENVBUILD_GPUS_PER_NODE",
                                                 "ENVBUILD_NPROC_PER_NODE", "ENVBUILD_MASTER_ADDR",
                                                 "ENVBUILD_MASTER_PORT", "ENVBUILD_NODE_RANK") if k in values]


def comment(lines: list[str] | tuple[str, ...], width: int = 96) -> list[str]:
    """``# `` lines, wrapped."""
    import textwrap

    out = []
    for line in lines:
        out += ["# " + x for x in textwrap.wrap(" ".join(line.split()), width, break_on_hyphens=False,
                                                break_long_words=False)] or ["#"]
    return out
