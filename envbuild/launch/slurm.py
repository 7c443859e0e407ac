"""Job -> a Slurm batch script (``sbatch``). Pure.

One task per node (or one task in all, for programs that start their own ranks) runs the
task script the batch script writes into the job folder; the first node of the allocation is
the rendezvous host (``scontrol show hostnames``), the port ``49152 + job id % 16384`` as the
published Megatron-DeepSpeed script has it. Output goes to ``<output_dir>/<job name>-<job id>.out``
and ``.err``, which ``envbuild launch --submit`` collects. Where the recipe's environment is a
container, the task runs in it through pyxis (``srun --container-image``), with the job
folder mounted.
"""

from __future__ import annotations

from envbuild.render import sitetemplates
from envbuild.launch.job import Job, unpack_script, comment, heredoc, path_word, say, task_script, variables
from envbuild.render.shell import q

PRELUDE = ['export ENVBUILD_NODE_RANK="${SLURM_NODEID:-0}"']


def output_paths(job: Job, job_id: str) -> tuple[str, str]:
    """The job's stdout and stderr files (relative to the submit folder when output_dir is)."""
    base = f"{job.output_dir.rstrip('/') or '.'}/{job.name}-{job_id}"
    return base + ".out", base + ".err"


def render(job: Job) -> str:
    """The sbatch script: envbuild's template (``envbuild/render/jinja/slurm.sbatch.j2``), or the site's over it
    (``LaunchOptions.templates``), given every line as shell text."""
    opts = job.options
    out = job.output_dir.rstrip("/") or "."
    directives = [f"--job-name={job.name}", f"--nodes={job.nodes}", "--ntasks-per-node=1"]
    if job.cpus_per_task:
        directives.append(f"--cpus-per-task={job.cpus_per_task}")
    if job.gpus_per_node:
        directives.append(f"--gres=gpu:{job.gpus_per_node}")
    directives += [f"--output={out}/%x-%j.out", f"--error={out}/%x-%j.err"]
    if opts and opts.time_limit:
        directives.append(f"--time={opts.time_limit}")
    if job.exclusive:  # every GPU of the node: no other job shares its CPUs, memory and links
        directives.append("--exclusive")
    if opts and opts.partition:
        directives.append(f"--partition={opts.partition}")
    port = (str(job.master_port) if job.master_port
            else '"$((SLURM_JOB_ID % 16384 + 49152))"')
    setup = [f"JOB_DIR=\"$(cd {q(out)} && pwd)\"", "export JOB_DIR",
             *variables(job, {"ENVBUILD_JOB_ID": '"$SLURM_JOB_ID"', "ENVBUILD_NNODES": '"$SLURM_JOB_NUM_NODES"',
                              "ENVBUILD_GPUS_PER_NODE": str(job.gpus_per_node),
                              "ENVBUILD_NPROC_PER_NODE": str(job.nproc_per_node),
                              "ENVBUILD_MASTER_PORT": port}),
             "# the first node of the allocation hosts the rendezvous",
             'ENVBUILD_MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)"',
             "export ENVBUILD_MASTER_ADDR"]
    if job.replaced:
        setup += say(job.replaced)
    for name, content in sorted(job.files.items()):
        setup += [f"# {name}, as the published script writes it", *heredoc(f'"$JOB_DIR"/{q(name)}', content)]
    if job.packed is not None:
        setup += distribute(job)
    task = '"$JOB_DIR/$SLURM_JOB_NAME-$SLURM_JOB_ID.task.sh"'
    staged = f'"$JOB_DIR"/{q(job.stage)}' if job.prepare and job.container_image else None
    run: list[tuple[str, str | None]] = []  # (text, None) or (before, after) the container mounts
    if staged:
        run += [(line, None) for line in (
            "# the image's run-time data, prepared once for the job in one container (kept for later jobs",
            "# of this image, named for its plan, while its SHA256SUMS holds); every task copies it from there")]
        run.append((f"srun --nodes=1 --ntasks=1 --container-image={q(job.container_image)} ",
                    " " + " ".join(["sh", path_word(job.prepare), "--stage", staged])))
    srun = ["srun"]
    if job.mode == "once":
        srun += ["--nodes=1", "--ntasks=1"]
    else:
        srun += ['--nodes="$SLURM_JOB_NUM_NODES"', "--ntasks-per-node=1"]
    if job.container_image:
        run.append((" ".join([*srun, f"--container-image={q(job.container_image)}"]) + " ", f" bash {task}"))
    else:
        run.append((" ".join([*srun, "bash", task]), None))
    return sitetemplates.render("slurm.sbatch.j2", {
        "header": [*comment(job.header), *comment([f"NOTE: {n}" for n in job.notes])],
        "directives": directives, "account": opts.account if opts and opts.account else None,
        "setup": setup, "task": ["# the task every node runs", *heredoc(task, task_script(job, PRELUDE, staged=staged))],
        "run": run}, opts.templates if opts else ())


def distribute(job: Job) -> list[str]:
    """The lines that bring the packed environment (``envbuild pack``) to every node of the
    allocation before the task: Slurm's ``sbcast`` copies it to each node's own disk through
    Slurm's message tree (the file is read once, by the batch host, from where the job was
    submitted; sbcast's first hop has the fan-out ``job.fanout`` (``sbcast_fanout``), every
    hop below it the site's ``TreeWidth``), each node checks the
    sha256 the pack's manifest recorded and only then unpacks it at the prefix, where the task
    reads it. A node whose copy differs, or whose prefix lies on a shared file system (where
    every node would replace the one copy the others read), fails the job before any task."""
    p = job.packed
    parent, copy, unpack = unpack_script(p)
    each = '--nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1'
    return ["# the environment, packed once (envbuild pack, "
            f"{p.bytes} bytes, sha256 {p.sha256}): sbcast sends it to every node's own disk",
            f"# through Slurm's message tree (sbcast's own fan-out {job.fanout}, then the site's TreeWidth);",
            "# each node checks the sha256, then unpacks it at the prefix",
            f"srun {each} mkdir -p {q(parent)}",
            f"sbcast --force --fanout={int(job.fanout)} {q(p.archive)} {q(copy)}",
            "# shellcheck disable=SC2016  # expanded by each node's shell",
            f"srun {each} sh -c {q(unpack)}"]
