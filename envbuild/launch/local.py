"""Job -> a bash script that runs the same task on this node, directly. Pure.

The task (the plan's env file, the recipe's variables, its command) runs once, in the
foreground; its stdout, stderr and exit status land in ``<output_dir>/<job name>-local.out``,
``.err`` and ``.rc``, which ``envbuild launch --submit`` collects.
"""

from __future__ import annotations

from envbuild.errors import InputError
from envbuild.launch.job import Job, comment, heredoc, say, task_script, variables
from envbuild.render.shell import q

PORT = 29500


def output_paths(job: Job) -> tuple[str, str, str]:
    base = f"{job.output_dir.rstrip('/') or '.'}/{job.name}-local"
    return base + ".out", base + ".err", base + ".rc"


def render(job: Job) -> str:
    if job.nodes != 1:
        raise InputError("--scheduler local runs on this node only", hint="leave --nodes out (or 1)")
    out = job.output_dir.rstrip("/") or "."
    port = str(job.master_port) if job.master_port else str(PORT)
    base = f'"$JOB_DIR"/{q(job.name + "-local")}'
    lines = ["#!/usr/bin/env bash", *comment(job.header), *comment([f"NOTE: {n}" for n in job.notes]),
             "set -euo pipefail", f"mkdir -p {q(out)}",
             f"JOB_DIR=\"$(cd {q(out)} && pwd)\"", "export JOB_DIR",
             *variables(job, {"ENVBUILD_JOB_ID": '"local-$$"', "ENVBUILD_NNODES": "1",
                              "ENVBUILD_GPUS_PER_NODE": str(job.gpus_per_node),
                              "ENVBUILD_NPROC_PER_NODE": str(job.nproc_per_node),
                              "ENVBUILD_MASTER_ADDR": "127.0.0.1", "ENVBUILD_MASTER_PORT": port,
                              "ENVBUILD_NODE_RANK": "0"})]
    if job.replaced:
        lines += say(job.replaced)
    for name, content in sorted(job.files.items()):
        lines += heredoc(f'"$JOB_DIR"/{q(name)}', content)
    lines += [*heredoc(f"{base}.task.sh", task_script(job, [])),
              "rc=0", f"bash {base}.task.sh > {base}.out 2> {base}.err || rc=$?",
              f'echo "$rc" > {base}.rc', 'exit "$rc"']
    return "\n".join(lines) + "\n"
