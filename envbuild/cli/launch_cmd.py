"""``envbuild launch``: render (and with --submit run) a recipe's published run on a scheduler."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from envbuild.cli import cli
from envbuild.cli.options import identity_option, recipe_argument, target_option
from envbuild.cli.output import console, emit_json
from envbuild.errors import NOT_JUDGED


@cli.command("launch")
@recipe_argument()
@target_option()
@click.option("--scheduler", type=click.Choice(["slurm", "pbs", "k8s", "local"]), required=True,
              help="Render for Slurm (sbatch), PBS (qsub), Kubernetes (an Indexed Job) or this node.")
@click.option("--nodes", type=click.IntRange(1), help="Nodes (pods) [the published run's].")
@click.option("--gpus-per-node", type=click.IntRange(0), help="GPUs per node [the published run's, else the target's].")
@click.option("--variant", help="A benchmark variant of the recipe (envbuild show RECIPE), or two-pods (k8s).")
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the script/manifest here [stdout].")
@click.option("--submit", is_flag=True, help="Submit (slurm, local), follow the job, collect and parse its output.")
@click.option("--smoke-only", is_flag=True,
              help="Replace the training command by envbuild's CPU smoke (all-reduce over every rank); said in the script.")
@click.option("--command-override", metavar="CMD", help="Replace the training command by CMD; said in the script.")
@click.option("--image", "--container-image", "container_image", metavar="IMAGE",
              help="Image the job runs: a registry reference for Kubernetes (required there), a .sqsh path or "
                   "registry reference for pyxis [Slurm: the enroot import the provision made].")
@click.option("--no-container", is_flag=True,
              help="Run a container recipe without its container (the plan's environment on the node).")
@click.option("--run", "run", type=click.Path(file_okay=False, path_type=Path),
              help="Provision run whose plan is launched (and verified before --submit) [newest for the target].")
@click.option("--facts", "facts_file", help="Node facts JSON for the plan (no --run).")
@click.option("--lock", "lock_file", help="Lockfile (default: $ENVBUILD_LOCKDIR's, else the shipped lock, if present).")
@click.option("--prefix", help="Environment prefix on the nodes (no --run) [the plan's default].")
@click.option("--git-mirror", help="Folder with OWNER/NAME(.git) mirrors (no --run).")
@click.option("--time", "time_limit", metavar="HH:MM:SS", help="Wall-clock limit of the job.")
@click.option("--partition", help="Slurm partition / PBS queue [the target's jobs.queue].")
@click.option("--account", help="Slurm account / PBS project [the target's jobs.account].")
@click.option("--namespace", help="Kubernetes namespace [the target's jobs.namespace, else envbuild].")
@click.option("--kueue-queue", metavar="NAME", help="Kubernetes: the Kueue LocalQueue that admits the job "
              "(its kueue.x-k8s.io/queue-name label) [the target's jobs.kueue_queue].")
@click.option("--k8s-workload", type=click.Choice(["job", "jobset", "trainjob", "pytorchjob"]), default=None,
              help="Kubernetes workload: an Indexed Job and its headless Service [job], a JobSet "
                   "(needs the JobSet controller), a Kubeflow Trainer v2 TrainJob (needs the Trainer and its "
                   "torch-distributed runtime) or a legacy Kubeflow PyTorchJob (needs the training operator v1).")
@click.option("--master-port", type=click.IntRange(1, 65535), help="Rendezvous port [scheduler default].")
@click.option("--timeout", type=click.IntRange(1), default=3600, show_default=True,
              help="--submit: cancel the job after this many seconds.")
@click.option("-i", "--identity", callback=identity_option,
              help="--submit: SSH private key to verify the provision run's nodes with [the provision's].")
@click.option("--known-hosts", "known_hosts", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="--submit: known_hosts file to check the nodes' host keys against (repeatable) [the provision's].")
@click.option("--packed", "packed_file", type=click.Path(dir_okay=False, path_type=Path),
              help="A pack of the environment (envbuild pack): sent to every node with sbcast, its sha256 "
                   "checked there, unpacked at its prefix before the task, or, for a squashfs image (.sqsh), "
                   "mounted there by each task with squashfuse (slurm; pbs: each node copies it from the "
                   "shared folder through mpiexec).")
@click.option("--trusted-key", "pack_keys", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="With --packed: the pack's signed provenance (PACK.intoto.jsonl, envbuild pack --sign-key) must "
                   "be signed by this public key (repeatable) and say what its manifest says; checked before "
                   "anything is submitted.")
@click.option("--fanout", type=click.IntRange(1, 8), default=None,
              help="--packed: sbcast's own fan-out, its first hop (1: the batch host hands the pack to one "
                   "node; 8: up to 8 nodes get it from the batch host); below it nodes pass it on as the "
                   "site's TreeWidth says [1 up to 16 nodes, else 2].")
@click.option("--templates", "templates_dir", type=click.Path(file_okay=False, path_type=Path),
              help="A folder of the site's own slurm.sbatch.j2 / pbs.qsub.j2, each extending envbuild's "
                   "and overriding its blocks (account, modules, environment, mounts, ...): docs/launch.md.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def launch_cmd(recipe, target, scheduler, nodes, gpus_per_node, variant, out, submit, smoke_only,
               command_override, container_image, no_container, run, facts_file, lock_file, prefix,
               git_mirror, time_limit, partition, account, namespace, kueue_queue, k8s_workload, master_port, timeout,
               identity, known_hosts, packed_file, fanout, templates_dir, as_json, pack_keys=()):
    """Render RECIPE's published run for a scheduler; with --submit run it and collect the result.

    \b
    The environment is the plan's: each task sources the env file its env-file step writes.
    With --submit, a provisioned run of RECIPE on TARGET is verified first, its nodes reached
    with the SSH key and known_hosts files the provision recorded (-i/--known-hosts replace
    them), and drifted nodes are refused (exit 1; a node not verified: exit 3); the job's
    output lands in a run directory under the node it ran on, parsed with the recipe's own
    parser, read by `envbuild report`; runs/latest moves to it only when the job completed
    with a measurement. Exit 1 when the job fails (its state and output tail are printed)
    or its result misses the recipe's threshold.
    A target's jobs section says what its scheduler requires of every job (Polaris: an account
    and a queue); set jobs.account and jobs.queue in your own copy of the target file to leave
    the flags out.
    Examples:
      envbuild launch megatron-deepspeed-slurm -t slurm --scheduler slurm --variant multi-node -o mnmg.sbatch
      envbuild launch polaris-megatron-deepspeed -t polaris --scheduler pbs --nodes 2 --account PROJECT --partition prod
      envbuild launch megatronapp -t rtx4090-pod --scheduler k8s --variant two-pods \\
        --image registry.example.org/envbuild/megatronapp:rtx4090-pod -o pods.yaml
      envbuild launch alpa-megatron -t slurm --scheduler slurm --smoke-only --gpus-per-node 2 --submit
    """
    from envbuild.flows.launch import LaunchRequest, launch
    from envbuild.flows.nodes import NodesRequest

    outcome = launch(LaunchRequest(recipe=recipe, target=target, scheduler=scheduler, nodes=nodes,
                                   gpus_per_node=gpus_per_node, variant=variant, smoke_only=smoke_only,
                                   command_override=command_override, container_image=container_image,
                                   no_container=no_container, time_limit=time_limit, partition=partition,
                                   account=account, namespace=namespace, kueue_queue=kueue_queue,
                                   k8s_workload=k8s_workload, master_port=master_port, packed=packed_file,
                                   pack_keys=tuple(pack_keys), fanout=fanout, templates=templates_dir,
                                   out=out, submit=submit, run=run, facts_file=facts_file,
                                   lock_file=lock_file, prefix=prefix, git_mirror=git_mirror,
                                   reach=NodesRequest(identity_file=identity, known_hosts=tuple(known_hosts)),
                                   timeout=timeout, argv=("envbuild", *sys.argv[1:])),
                     warn=lambda msg: click.echo(f"warning: {msg}", err=True))
    if outcome.job is None:
        _print_rendered(outcome.rendered, scheduler, outcome.file, as_json)
        return None
    return _print_job(outcome, as_json)


def _print_rendered(rendered, scheduler: str, out: Path | None, as_json: bool) -> None:
    if as_json:
        emit_json({"scheduler": scheduler, "file": str(out) if out else None, "name": rendered.filename,
                   "nodes": rendered.job.nodes, "gpus_per_node": rendered.job.gpus_per_node,
                   "replaced": rendered.job.replaced, "text": None if out else rendered.text})
    elif out:
        console.print(f"wrote {out} ({scheduler}, {rendered.job.nodes} node(s))")
    else:
        sys.stdout.write(rendered.text)


def _print_job(launched, as_json: bool) -> int | None:
    """The submitted job: its state, its verdict, where its run is; the exit code."""
    outcome = launched.job
    res = outcome.result
    native = outcome.smoke.native  # the job node's smoke.json, typed (envbuild.record.SmokeRecord)
    if as_json:
        emit_json({"run": str(outcome.run_dir), "passed": outcome.passed, "status": outcome.status,
                   "job": res.to_dict(), "node": outcome.node, "nodes": outcome.hosts,
                   "node_dir": outcome.node_dir, "latest": outcome.published, "results": outcome.smoke.as_written()})
    else:
        console.print(f"job {res.job_id} ({res.scheduler}) on {', '.join(outcome.hosts) or '?'}: {res.state}, "
                      f"exit {res.exit_code}; run {outcome.run_dir}", markup=False)
        if native is not None and native.verdict is not None:
            console.print(f"  {native.verdict.reason}", markup=False)
        elif (c := outcome.smoke.collective) is not None:
            console.print(f"  smoke all-reduce x{c.world_size}: ok={c.ok}, "
                          f"max busbw {c.max_busbw_gbps} GB/s ({(native.reason if native else None) or ''})", markup=False)
    if not outcome.published:
        click.echo("runs/latest not moved: the job " + ("carries no measurement" if res.ok else "did not complete"),
                   err=True)
    if (failure := launched.failure) is not None:
        raise failure
    if (why := launched.not_judged) is not None:
        click.echo(f"verdict: NOT JUDGED: the job completed; {why}", err=True)
        return NOT_JUDGED
    return None
