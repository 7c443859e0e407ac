"""``envbuild launch``: render (and with --submit run) a recipe's published run on a scheduler."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from envbuild.cli import cli
from envbuild.cli.options import recipe_argument, target_option
from envbuild.cli.output import console, emit_json
from envbuild.errors import NOT_JUDGED, CheckFailed, EnvironmentProblem, InputError


def _plan(rec, tgt, *, run_dir: Path | None, facts_file, lock_file, prefix, git_mirror, container: bool):
    """The plan the launch reads: a provisioned run's, else the image's for a container
    recipe run in its container, else the node plan resolved as ``envbuild plan`` does."""
    from envbuild.inputs import find_lock, node_facts
    from envbuild.plan.build import PlanOptions
    from envbuild.plan.resolve import fetch_urls, resolve

    if run_dir is not None:
        from envbuild.record import RunRecord

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
@click.option("--no-container", is_flag=True, help="Run a container recipe without its container (the plan's environment on the node).")
@click.option("--run", "run", type=click.Path(file_okay=False, path_type=Path),
              help="Provision run whose plan is launched (and verified before --submit) [newest for the target].")
@click.option("--facts", "facts_file", help="Node facts JSON for the plan (no --run).")
@click.option("--lock", "lock_file", help="Lockfile (default: $ENVBUILD_LOCKDIR's, else the shipped lock, if present).")
@click.option("--prefix", help="Environment prefix on the nodes (no --run) [the plan's default].")
@click.option("--git-mirror", help="Folder with OWNER/NAME(.git) mirrors (no --run).")
@click.option("--time", "time_limit", metavar="HH:MM:SS", help="Wall-clock limit of the job.")
@click.option("--partition", help="Slurm partition / PBS queue [the target's jobs.queue].")
@click.option("--account", help="Slurm account / PBS project [the target's jobs.account].")
@click.option("--namespace", default="default", show_default=True, help="Kubernetes namespace.")
@click.option("--k8s-workload", type=click.Choice(["job", "jobset", "pytorchjob"]), default=None,
              help="Kubernetes workload: an Indexed Job and its headless Service [job], a JobSet "
                   "(needs the JobSet controller) or a Kubeflow PyTorchJob (needs the training operator).")
@click.option("--master-port", type=click.IntRange(1, 65535), help="Rendezvous port [scheduler default].")
@click.option("--timeout", type=click.IntRange(1), default=3600, show_default=True,
              help="--submit: cancel the job after this many seconds.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def launch_cmd(recipe, target, scheduler, nodes, gpus_per_node, variant, out, submit, smoke_only,
               command_override, container_image, no_container, run, facts_file, lock_file, prefix,
               git_mirror, time_limit, partition, account, namespace, k8s_workload, master_port, timeout, as_json):
    """Render RECIPE's published run for a scheduler; with --submit run it and collect the result.

    \b
    The environment is the plan's: each task sources the env file its env-file step writes.
    With --submit, a provisioned run of RECIPE on TARGET is verified first and drifted nodes
    are refused (exit 1); the job's output lands in a run directory, parsed with the recipe's
    own parser, read by `envbuild report`. Exit 1 when the job fails (its state and output
    tail are printed) or its result misses the recipe's threshold.
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
    from envbuild.launch import LaunchOptions, render_launch
    from envbuild.launch import submit as sub
    from envbuild.recipes import load_recipe
    from envbuild.targets import load_target

    rec, tgt = load_recipe(recipe), load_target(target)
    if k8s_workload and scheduler != "k8s":
        raise InputError(f"--k8s-workload is a Kubernetes option; the scheduler is {scheduler}",
                         hint="drop --k8s-workload, or use --scheduler k8s")
    if submit and scheduler not in ("slurm", "local"):
        raise InputError(f"--submit runs slurm and local jobs; {scheduler} is render-only here",
                         hint="write the file with -o and submit it yourself (qsub / kubectl apply -f)")
    opts = LaunchOptions(scheduler=scheduler, nodes=nodes, gpus_per_node=gpus_per_node, variant=variant,
                         smoke_only=smoke_only, command_override=command_override,
                         container_image=container_image, no_container=no_container, time_limit=time_limit,
                         partition=partition, account=account, namespace=namespace,
                         k8s_workload=k8s_workload or "job", master_port=master_port)
    provisioned = sub.provisioned_run(rec.name, tgt.name, run) if (submit or run) else None
    plan = _plan(rec, tgt, run_dir=provisioned, facts_file=facts_file, lock_file=lock_file, prefix=prefix,
                 git_mirror=git_mirror, container=not no_container)
    if not submit:
        rendered = render_launch(rec, tgt, plan, opts)
        if out:
            out.write_text(rendered.text)
            if scheduler != "k8s":
                out.chmod(0o755)
        if as_json:
            emit_json({"scheduler": scheduler, "file": str(out) if out else None, "name": rendered.filename,
                       "nodes": rendered.job.nodes, "gpus_per_node": rendered.job.gpus_per_node,
                       "replaced": rendered.job.replaced, "text": None if out else rendered.text})
        elif out:
            console.print(f"wrote {out} ({scheduler}, {rendered.job.nodes} node(s))")
        else:
            sys.stdout.write(rendered.text)
        return
    verdicts = []
    if provisioned is not None:
        verdicts = sub.verify_nodes(provisioned)
        drifted = [v.node for v in verdicts if v.status == "drift"]
        if drifted:
            raise CheckFailed(f"not submitting: drift on {', '.join(drifted)} (run {provisioned.name})",
                              hint="reprovision those nodes (envbuild provision) or see envbuild verify --run "
                                   f"{provisioned}")
        down = [f"{v.node} ({v.message})" for v in verdicts if v.status == "unreachable"]
        if down:
            raise EnvironmentProblem(f"not submitting: could not verify {'; '.join(down)}",
                                     hint="check that the nodes are up and the environment prefix exists")
    else:
        click.echo(f"warning: no provision run of {rec.name} on {tgt.name}: the nodes' environments are "
                   "not verified before submitting", err=True)
    outcome = sub.launch(rec, tgt, plan, opts, argv=["envbuild", *sys.argv[1:]], timeout=timeout,
                         provisioned=provisioned, verdicts=verdicts)
    res = outcome.result
    if as_json:
        emit_json({"run": str(outcome.run_dir), "passed": outcome.passed, "status": outcome.status,
                   "job": res.to_dict(),
                   "node": outcome.node, "results": outcome.smoke})
    else:
        console.print(f"job {res.job_id} ({res.scheduler}): {res.state}, exit {res.exit_code}; run {outcome.run_dir}")
        native = outcome.smoke.get("native") or {}
        verdict = native.get("verdict") or {}
        if verdict:
            console.print(f"  {verdict.get('reason')}")
        elif outcome.smoke.get("collective"):
            c = outcome.smoke["collective"]
            console.print(f"  smoke all-reduce x{c.get('world_size')}: ok={c.get('ok')}, "
                          f"max busbw {c.get('max_busbw_gbps')} GB/s ({native.get('reason', '')})")
    if not res.ok:
        raise CheckFailed(f"job {res.job_id} {res.state} (exit {res.exit_code})"
                          + (f": {res.reason}" if res.reason else "") + "\n" + res.tail(),
                          hint=f"the job's output is in {outcome.run_dir / 'job'}")
    if outcome.status == "not-judged":
        why = ((outcome.smoke.get("native") or {}).get("verdict") or {}).get("reason") \
            or "the recipe's benchmark did not run in this job (" + ((outcome.smoke.get("native") or {}).get("reason")
                                                                     or "smoke only") + ")"
        click.echo(f"verdict: NOT JUDGED: the job completed; {why}", err=True)
        return NOT_JUDGED
    if not outcome.passed:
        raise CheckFailed("the job finished but its result does not pass",
                          hint=f"envbuild report {outcome.run_dir}")

