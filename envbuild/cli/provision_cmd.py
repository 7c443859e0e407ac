"""``envbuild provision``: install a recipe onto nodes through ansible-runner."""

from __future__ import annotations

import sys

import click

from envbuild.cli import cli
from envbuild.cli.options import complete_recipe, hosts_option, identity_option, recipe_argument, target_option
from envbuild.cli.output import console, emit_json_line
from envbuild.errors import InputError


@cli.command("provision")
@recipe_argument(required=False)
@target_option(help="Target profile name or YAML path (local: this machine).")
@click.option("--recipe", "-r", "recipe_option", default=None, shell_complete=complete_recipe,
              help="Same as the RECIPE argument (kept for older scripts).")
@click.option("--hosts", default=None, callback=hosts_option, help="Nodes: user@h1[:port],h2 ...")
@click.option("--inventory", default=None, type=click.Path(), help="Ansible YAML inventory of the nodes.")
@click.option("--backend", type=click.Choice(["venv", "conda", "container"]), default=None,
              help="Environment kind (default: the recipe's; container: the recipe's image built on each node).")
@click.option("--base", default=None, metavar="IMAGE",
              help="--backend container: the image's base [the recipe's, else chosen from the torch wheel].")
@click.option("--engine-arg", "engine_args", multiple=True, metavar="ARG",
              help="--backend container: an extra option of `podman/docker build` (repeatable), e.g. "
                   "--engine-arg=--isolation=chroot.")
@click.option("--engine-env", "engine_env", multiple=True, metavar="NAME=VALUE",
              help="--backend container: environment of the engine's commands on the nodes (repeatable), "
                   "e.g. CONTAINERS_STORAGE_CONF=/srv/podman/storage.conf.")
@click.option("--prefix", default=None, help="Where the environment goes on each node.")
@click.option("--conda-channel", default=None, help="--backend conda: channel URL or local channel folder.")
@click.option("--conda-package", "conda_packages", multiple=True,
              help="--backend conda: a conda spec to install (repeatable; default python=<recipe's>).")
@click.option("--dry-run", is_flag=True, help="Print the plan per node and the ansible-playbook command; install nothing.")
@click.option("--git-mirror", default=None, type=click.Path(), help="Folder of git mirrors to clone from.")
@click.option("--wheelhouse", default=None, type=click.Path(), help="Folder of wheels (find-links) for pip.")
@click.option("--data-mirror", "data_mirror", default=None, type=click.Path(),
              help="Folder of the recipe's data files (DIR/<file>), read on the nodes before any download.")
@click.option("--lock", "lock", default=None, type=click.Path(),
              help="Lockfile to use (default: $ENVBUILD_LOCKDIR's, else the lock shipped with envbuild).")
@click.option("--locked", is_flag=True, help="Refuse to create a missing lock (a stale lock is always refused).")
@click.option("--allow-unverified", "allow_unverified", multiple=True, metavar="NAME",
              help="Install package NAME although the lock has no hash for it (repeatable; the report names it).")
@click.option("--bundle-sha256", "bundle_sha256", default=None, metavar="HEX",
              help="Pin the --bundle file: its sha256 (printed by `envbuild bundle`) must be this, checked "
                   "before it is unpacked; needed for a bundle made from a lock envbuild does not hold.")
@click.option("--trusted-key", "trusted_keys", multiple=True, type=click.Path(dir_okay=False), metavar="PUB",
              help="Trust a --bundle signed by this Ed25519 public key (PEM or OpenSSH; repeatable): its "
                   "provenance (BUNDLE.intoto.jsonl) is verified, its sha256 and name checked before it is "
                   "unpacked, an expired statement (bundle --valid-days) refused (exit 1), and a bundle older "
                   "than the newest accepted for its recipe and target refused ($ENVBUILD_HOME/trust); its lock "
                   "must still be the one envbuild holds (or --bundle-sha256).")
@click.option("--provenance", "provenance", default=None, type=click.Path(dir_okay=False),
              help="The --bundle's signed provenance (default: BUNDLE.intoto.jsonl beside it).")
@click.option("--bundle", "bundle", default=None, type=click.Path(),
              help="Offline: provision from this bundle (envbuild bundle) alone, no index, no mirror. "
                   "A bundle that does not match its manifest exits 2, one lacking what the plan needs 1.")
@click.option("--push-wheels/--no-push-wheels", "push_wheels", default=None,
              help="Download every wheel once on this machine and push it to the nodes (pip --no-index "
                   "there, hashes checked). Default: on for more than one SSH node.")
@click.option("--fanout", "fanout", type=click.IntRange(1, 64), default=None, metavar="K",
              help="Pushed wheels go down a tree of the nodes: this machine sends one copy, each node that "
                   "checked its copy's sha256 sends it on to K more (scp run on that node, the next node's "
                   "host key checked; on any failure a node takes this machine's copy). Default: each node "
                   "gets its copy from this machine.")
@click.option("--node-identity", "node_identity", default=None, metavar="PATH",
              help="With --fanout: a private key at PATH ON THE NODES that logs one node in to the next "
                   "(default: the nodes' own SSH setup). No key is sent and no agent forwarded.")
@click.option("--installer", type=click.Choice(["auto", "pip", "uv"]), default="auto", show_default=True,
              help="Package installs with uv (pushed to nodes of this machine's OS and architecture) "
                   "or pip; auto: uv where it can run. Steps that need pip keep it.")
@click.option("--no-smoke", is_flag=True,
              help="Skip the smoke benchmark step (nothing is then measured: the verdict is NOT JUDGED, exit 5). "
                   "A node with fewer GPUs than the benchmark needs is then installed, with a warning.")
@click.option("--smoke-preset", "smoke_preset", type=click.Choice(["tiny", "350m"]), default="tiny", show_default=True,
              help="The GPT smoke's size: tiny (seconds) or 350m (a ~355M GPT, for MFU); on the node's GPU where it has one.")
@click.option("--force", is_flag=True, help="Run every step again, even those done whose effect holds.")
@click.option("--from-step", "from_step", default=None, metavar="ID",
              help="Run again from step ID (see --dry-run for the ids), and every step after it.")
@click.option("--insecure", is_flag=True, help="Do not check SSH host keys (throwaway test nodes only).")
@click.option("--identity", "-i", "identity_file", default=None, type=click.Path(), callback=identity_option,
              help="SSH private key (as ssh -i).")
@click.option("--known-hosts", "known_hosts", multiple=True, type=click.Path(),
              help="known_hosts file to check host keys against (repeatable; default ssh's own, "
                   "or $ENVBUILD_KNOWN_HOSTS).")
@click.option("--json", "as_json", is_flag=True,
              help='JSON Lines: one {"type": "event"} object per line, then one {"type": "result"} line.')
def provision_cmd(recipe, target, recipe_option, hosts, inventory, backend, prefix, conda_channel, conda_packages,
                  dry_run, git_mirror, wheelhouse, lock, locked, allow_unverified, bundle, no_smoke, smoke_preset, force,
                  from_step, insecure, identity_file, known_hosts, as_json, push_wheels=None,
                  base=None, engine_args=(), engine_env=(), data_mirror=None, installer="auto", bundle_sha256=None,
                  trusted_keys=(), provenance=None, fanout=None, node_identity=None):
    """Provision RECIPE (default: the embedded reference) onto the nodes of TARGET: facts,
    preflight, lock, plan, ansible, results.

    A step is skipped only when its marker matches and its effect holds on the node now
    (installed distributions and their files, git HEAD and tree, patches, the env file); the
    first step that is not done runs again with every step after it, a broken pip step as a
    reinstall. When every step of every node is done, Ansible does not start at all.
    `--prefix /scratch/envs/{node}` gives each node its own folder.

    \b
    Example:
      envbuild provision --target local --prefix /tmp/env --wheelhouse /opt/wheels
      envbuild provision opt-175b-azure -t azure-nd96 --hosts azureuser@10.0.0.4,10.0.0.5 -i ~/.ssh/id_ed25519
    With --json, stdout is JSON Lines: each event as it happens
    ({"type": "event", "ts", "host", "step", "kind", "msg"}), then one line
    {"type": "result", "run_dir", "status", "exit_code", "results", "enter", ...}
    ("enter": per node that finished ok, the command that enters its environment).
    Exit codes: 0 every node ok and the report says PASS; 1 refused by preflight, or the
    report says FAIL (drift, benchmark below threshold, state not verified); 5 every node ok
    and nothing failed, but the report says NOT JUDGED (--no-smoke, a recipe without a
    threshold, a benchmark that needs GPUs the node lacks); 2 bad input;
    3 a node unreachable; 4 a node failed a step (or ansible timed out / stopped early);
    130 interrupted by SIGINT, 143 by SIGTERM (ansible-playbook's process group is stopped,
    run.json records "interrupted" and the step each node was in).
    """
    from envbuild.cli.progress import ProgressDisplay
    from envbuild.flows.nodes import NodesRequest
    from envbuild.flows.provision import ProvisionRequest, provision

    if recipe and recipe_option and recipe != recipe_option:
        raise InputError(f"two recipes given: {recipe} (argument) and {recipe_option} (--recipe)",
                         hint="give the recipe once, as the RECIPE argument")
    opts = ProvisionRequest(target=target, recipe=recipe or recipe_option,
                            reach=NodesRequest(hosts=hosts, inventory=inventory, identity_file=identity_file,
                                               known_hosts=tuple(known_hosts), insecure=insecure),
                            backend=backend, prefix=prefix, conda_channel=conda_channel,
                            conda_packages=tuple(conda_packages), dry_run=dry_run, git_mirror=git_mirror,
                            wheelhouse=wheelhouse, lock=lock, locked=locked, data_mirror=data_mirror,
                            allow_unverified=tuple(allow_unverified), smoke=not no_smoke, smoke_preset=smoke_preset,
                            json_lines=as_json, force=force, from_step=from_step, bundle=bundle,
                            bundle_sha256=bundle_sha256, push_wheels=push_wheels,
                            trusted_keys=tuple(trusted_keys), provenance=provenance,
                            argv=("envbuild", *sys.argv[1:]),
                            base=base, engine_args=tuple(engine_args), engine_env=tuple(engine_env),
                            installer=installer, fanout=fanout, node_identity=node_identity)
    if as_json:
        out = provision(opts, echo=None)
        emit_json_line({"type": "result", "run_dir": str(out.run_dir), "status": out.status,
                        "exit_code": out.exit_code, "results": out.results, "enter": out.enter,
                        "command": out.command if dry_run and out.plans else None,
                        "plans": {h: p.model_dump(mode="json", by_alias=True) for h, p in out.plans.items()}
                        if dry_run else None})
    else:
        with ProgressDisplay(console) as progress:
            out = provision(opts, echo=progress)
    if not as_json:
        if dry_run:
            for host, plan in out.plans.items():
                console.print(f"[bold]{host}[/]  prefix {plan.prefix}  ({plan.backend})")
                for step in plan.steps:
                    console.print(f"  {step.id:<24} {step.kind:<15} {step.title}  [dim]{step.digest}[/]")
            if out.plans:  # a node that was not reached (or was refused) has no plan and no command
                left = sorted(h for h in out.results if h not in out.plans)
                console.print("\nrun by hand" + (f" (the planned nodes only, not {', '.join(left)})" if left else "")
                              + ":", style="bold")
                console.print(out.command, markup=False)
        for host, res in out.results.items():
            line = f"{host}: {res['status']}"
            if res.get("failed_step"):
                line += f" at {res['failed_step']}"
                if res.get("command"):
                    line += f": {res['command']}"
                if res.get("rc") is not None:
                    line += f" (exit {res['rc']})"
            console.print(line, markup=False)
            if res["status"] != "ok" and res.get("log_tail"):
                console.print("  " + "\n  ".join(res["log_tail"].splitlines()[-12:]), markup=False, style="dim")
        if out.status == "interrupted":
            console.print(f"interrupted: exit {out.exit_code}; the run is not runs/latest", markup=False)
        elif dry_run:
            console.print("dry run: nothing installed; the run is not runs/latest", markup=False)
        else:
            verdict_line(out)
            enter_lines(out)
        console.print(f"run directory: {out.run_dir}", markup=False)
    if out.exit_code:
        raise click.exceptions.Exit(out.exit_code)


def enter_lines(out) -> None:
    """How to enter the environment on each node that finished ok (``envbuild.plan.enter``)."""
    if len(out.enter) == 1 and len(out.results) == 1:
        console.print(f"enter the environment: {next(iter(out.enter.values()))}", markup=False)
        return
    for host, command in out.enter.items():
        console.print(f"enter the environment on {host}: {command}", markup=False)


def verdict_line(out) -> None:
    """The finished run's verdict (one line), as the provision flow returned it."""
    if out.verdict:
        notes = out.verdict_notes
        more = f" (+{len(notes) - 1} more: envbuild report)" if len(notes) > 1 else ""
        console.print(f"verdict: {out.verdict}" + (f": {notes[0]}{more}" if notes else ""), markup=False)
