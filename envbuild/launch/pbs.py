"""Job -> a PBS Pro batch script (``qsub``), as on ALCF Polaris. Pure.

The script loads the plan's environment module and sources the plan's env file (the venv over
the module's Python) in every rank's task, exports the recipe's variables and runs the command
from the recipe's working folder. A program that starts its own ranks (ALCF's train-gpt3.sh
calls ``mpiexec --hostfile $PBS_NODEFILE --ppn <GPUs>``) runs once, after a check that the node
has the GPUs the target says (its ranks per node); a per-node launch (torchrun on each node) runs
on every node through ``mpiexec -n <nodes> --ppn 1``, its node rank the PALS node id; the smoke
runs one rank per GPU through
``mpiexec -n <nodes x ranks> --ppn <ranks per node, from the target>``. Output goes to
``<output_dir>/<job name>-<job id>.out`` / ``.err`` (redirected by the script itself).
No PBS server runs in the test suite: these scripts are golden-tested and shellchecked only.
"""

from __future__ import annotations

from envbuild.render import sitetemplates
from envbuild.launch.job import Job, unpack_script, comment, heredoc, say, task_script, variables
from envbuild.render.shell import q

PRELUDE_RANK = ['export RANK="${PMI_RANK:-0}" WORLD_SIZE="${PMI_SIZE:-1}"',
                'export LOCAL_RANK="${PMI_LOCAL_RANK:-${PALS_LOCAL_RANKID:-0}}"',
                'export MASTER_ADDR="$ENVBUILD_MASTER_ADDR" MASTER_PORT="$ENVBUILD_MASTER_PORT"',
                'export ENVBUILD_NODE_RANK="${PALS_NODEID:-0}"']
PRELUDE_ONCE = ['export ENVBUILD_NODE_RANK=0']
# one task per node (a per-node or torchrun launch): mpiexec with one rank per node, whose rank is
# the node's
PRELUDE_NODE = ['export ENVBUILD_NODE_RANK="${PALS_NODEID:-${PMI_RANK:-0}}"']


def distribute(job: Job) -> list[str]:
    """The lines that bring the packed environment to every node's own disk before the task:
    PBS has no sbcast, so the site's MPI launcher starts one rank per node (``mpiexec --ppn 1``),
    and each node copies the pack from the shared folder the job reads it in, checks its sha256
    and unpacks it at the prefix (``unpack_script``). The shared file system serves one read per
    node: no tree, as Slurm's sbcast has."""
    p = job.packed
    _parent, _copy, unpack = unpack_script(p, fetch=True)
    return ["# the environment, packed once (envbuild pack, "
            f"{p.bytes} bytes, sha256 {p.sha256}): each node copies it from",
            "# the shared folder to its own disk (mpiexec, one rank per node), checks the sha256, unpacks it",
            "# shellcheck disable=SC2016  # expanded by each node's shell",
            f'mpiexec -n "$ENVBUILD_NNODES" --ppn 1 --hostfile "$PBS_NODEFILE" sh -c {q(unpack)}']


def render(job: Job) -> str:
    """The qsub script: envbuild's template (``envbuild/render/jinja/pbs.qsub.j2``), or the site's over it
    (``LaunchOptions.templates``), given every line as shell text."""
    opts = job.options
    out = job.output_dir.rstrip("/") or "."
    select = f"select={job.nodes}" + (f":ncpus={job.cpu_cores}" if job.cpu_cores else "") \
        + (f":ngpus={job.gpus_per_node}" if job.gpus_per_node else "")
    directives = [f"-N {job.name}", f"-l {select}", f"-l walltime={(opts.time_limit if opts else None) or '01:00:00'}",
                  *job.scheduler_options]
    if opts and opts.partition:
        directives.append(f"-q {opts.partition}")
    port = str(job.master_port) if job.master_port else "29500"
    setup = ["# PBS starts the job in $HOME: paths are relative to the folder qsub ran in",
             'cd "$PBS_O_WORKDIR"',
             f"JOB_DIR=\"$(cd {q(out)} && pwd)\"", "export JOB_DIR",
             f'exec > "$JOB_DIR/{job.name}-$PBS_JOBID.out" 2> "$JOB_DIR/{job.name}-$PBS_JOBID.err"',
             'ENVBUILD_NNODES="$(sort -u "$PBS_NODEFILE" | wc -l)"',
             'ENVBUILD_MASTER_ADDR="$(sed -n 1p "$PBS_NODEFILE")"',
             "export ENVBUILD_NNODES ENVBUILD_MASTER_ADDR",
             *variables(job, {"ENVBUILD_JOB_ID": '"$PBS_JOBID"', "ENVBUILD_GPUS_PER_NODE": str(job.gpus_per_node),
                              "ENVBUILD_NPROC_PER_NODE": str(job.nproc_per_node), "ENVBUILD_MASTER_PORT": port})]
    if job.replaced:
        setup += say(job.replaced)
    for name, content in sorted(job.files.items()):
        setup += heredoc(f'"$JOB_DIR"/{q(name)}', content)
    if job.packed is not None:
        setup += distribute(job)
    task = '"$JOB_DIR/$PBS_JOBID.task.sh"'
    per_rank, per_node = job.mode == "per-rank", job.mode == "per-node"
    prelude = PRELUDE_RANK if per_rank else PRELUDE_NODE if per_node else PRELUDE_ONCE
    run = []
    if per_rank:
        run.append(f'mpiexec -n "$((ENVBUILD_NNODES * {job.nproc_per_node}))" --ppn {job.nproc_per_node} '
                   f'--hostfile "$PBS_NODEFILE" --envall bash {task}')
    else:
        if job.gpus_per_node and not job.replaced:
            run += [f"# the program starts one rank per GPU nvidia-smi lists: the target says {job.gpus_per_node}",
                    "gpus_seen=\"$(nvidia-smi -L | grep -c '^GPU ')\"",
                    f'if [ "$gpus_seen" != {job.gpus_per_node} ]; then',
                    f'  echo "envbuild: $gpus_seen GPUs on $(hostname), the target {job.target} has '
                    f'{job.gpus_per_node} per node" >&2',
                    "  exit 1", "fi"]
        if per_node:  # the program is started on every node of the job, once
            run.append(f'mpiexec -n "$ENVBUILD_NNODES" --ppn 1 --hostfile "$PBS_NODEFILE" --envall bash {task}')
        else:
            run.append(f"bash {task}")
    return sitetemplates.render("pbs.qsub.j2", {
        "header": [*comment(job.header), *comment([f"NOTE: {n}" for n in job.notes])],
        "directives": directives, "account": opts.account if opts and opts.account else None,
        "setup": setup,
        "task": ["# the task each rank (or each node, or the one launcher) runs", *heredoc(task, task_script(job, prelude))],
        "run": run}, opts.templates if opts else ())
