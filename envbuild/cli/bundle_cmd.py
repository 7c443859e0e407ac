"""``envbuild bundle``: one tar file with everything a recipe's lock names, for nodes with no network."""

from __future__ import annotations

from pathlib import Path

import click

from envbuild.cli import cli
from envbuild.cli.options import valid_days as _days, valid_days_option
from envbuild.cli.output import console, emit_json


@cli.command("bundle")
@click.argument("recipe", required=False)
@click.option("--target", "-t", required=True, help="Target profile name or YAML path.")
@click.option("--facts", "facts_file", default=None, type=click.Path(),
              help="Facts of the nodes (envbuild facts --json -o): the plan they get decides the content.")
@click.option("--lock", "lock_file", default=None, type=click.Path(),
              help="Lockfile (default: $ENVBUILD_LOCKDIR's, else the lock shipped with envbuild).")
@click.option("--wheelhouse", default=None, type=click.Path(),
              help="Folder holding the wheels the lock takes from a wheelhouse (and any others).")
@click.option("--git-mirror", default=None, type=click.Path(),
              help="Folder of git mirrors (OWNER/NAME, OWNER/NAME.git or OWNER+NAME) of the recipe's sources.")
@click.option("--data-mirror", default=None, type=click.Path(),
              help="Folder holding the recipe's data files (DIR/<file>); others are downloaded from their URLs.")
@click.option("--prefix", default=None, help="The environment's prefix on the nodes, as provision will be given.")
@click.option("-o", "--output", "output", required=True, type=click.Path(),
              help="The bundle file to write (.tar, or .tar.gz / .tgz for gzip).")
@click.option("--sign-key", "sign_key", default=None, type=click.Path(dir_okay=False),
              help="Sign the bundle's provenance (an in-toto statement, SLSA provenance) with this Ed25519 "
                   "private key (PEM or OpenSSH): written as OUTPUT.intoto.jsonl; `provision --bundle "
                   "OUTPUT --trusted-key KEY.pub` verifies it before unpacking.")
@valid_days_option
@click.option("--image-tar", "image_tar", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="The base image a container recipe's plan needs, as its engine saved it (podman save -o FILE "
                   "IMAGE, or docker save): carried in the bundle and loaded on the node instead of pulled.")
@click.option("--offline", is_flag=True,
              help="Refuse (exit 1, nothing written) when the node would still need the network (a base image "
                   "not carried, apt packages, a conda channel), naming each.")
@click.option("--no-smoke", "no_smoke", is_flag=True,
              help="Plan the nodes without the benchmark, as `provision --no-smoke` does: a node with fewer GPUs "
                   "than the benchmark needs is planned, not refused; the bundle carries what the installs need "
                   "(provision with the benchmark still refuses such a node).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bundle_cmd(recipe, target, facts_file, lock_file, wheelhouse, git_mirror, data_mirror, prefix, output, sign_key,
               as_json, image_tar=None, offline=False, valid_days=None, no_smoke=False):
    """Pack RECIPE (default: the embedded reference) for TARGET into one tar file: a wheel or
    sdist for every locked package the plan installs (hash-checked while packing), each pinned
    commit as a shallow git repository from the mirror (with the submodules its options read,
    as Apex's cutlass for --fast_multihead_attn), the recipe's data files (sha256 checked
    against the recipe's), prebuilt extension wheels the build cache holds, the lock, the
    recipe, the plan of every node (of the target, or of --facts), the playbooks and a
    manifest with every file's sha256. Packages the node provides (preinstalled, a module's or the node's torch)
    are listed as omitted, not packed. The output and the manifest say "offline: yes" when the
    node needs nothing else, else "offline: no" and each thing it would still fetch (a
    container recipe's base image unless --image-tar carries it, apt packages, a conda channel).

    \b
    Example:
      envbuild bundle cpu-reference --target local --wheelhouse /opt/wheels -o ref.tar --offline
      envbuild provision --target local --bundle ref.tar --hosts root@node1
      podman save -o base.tar nvcr.io/nvidia/pytorch:23.04-py3
      envbuild bundle megatronapp -t rtx4090-pod --git-mirror M --image-tar base.tar -o app.tar
    Exit codes: 0 written; 1 a file does not hash as the lock says, the lock lacks a file, or
    --offline and the node would still need the network (nothing written); 2 bad input (an
    --image-tar that is not the plan's base image as an engine saved it); 3 no network for a
    download or no git mirror for a source.
    """
    from envbuild.flows.bundle import BundleRequest, bundle

    days = _days(valid_days, sign_key)
    say = (lambda _m: None) if as_json else (lambda m: console.print(m, markup=False))
    outcome = bundle(BundleRequest(recipe=recipe, target=target, output=Path(output), facts_file=facts_file,
                                   lock_file=lock_file, wheelhouse=wheelhouse, git_mirror=git_mirror,
                                   data_mirror=data_mirror, prefix=prefix,
                                   sign_key=Path(sign_key) if sign_key else None, valid_days=days,
                                   image_tar=image_tar, offline=offline, smoke=not no_smoke),
                     progress=say)
    if as_json:
        emit_json(outcome.to_dict())
        return
    packed, m = outcome.packed, outcome.packed.manifest
    console.print(f"bundle {packed.path}: {packed.size / 2**20:.1f} MiB, sha256 {packed.sha256}, "
                  f"planned for {len(outcome.nodes)} node(s): {', '.join(outcome.nodes)}", markup=False)
    for kind, row in outcome.kinds.items():
        console.print(f"  {kind:<9} {row['files']:>4} file(s) {row['bytes'] / 2**20:8.1f} MiB", markup=False)
    for o in m.omitted:
        console.print(f"  not packed: {o.name} ({o.why})", markup=False)
    for i in m.images:
        console.print(f"  image {i.name} (ID {i.id[:12]}): loaded on the node instead of pulled", markup=False)
    console.print("offline: yes: the node needs nothing beyond the bundle" if m.is_offline else
                  f"offline: no: the node still needs the network for {len(m.needs_network)} thing(s):", markup=False)
    for n in m.needs_network:
        console.print(f"  - {n.line()}", markup=False)
    if outcome.provenance:
        console.print(f"  provenance signed: {outcome.provenance}", markup=False)


@cli.command("pack")
@click.option("--prefix", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The provisioned environment to pack (its prefix on this machine).")
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The pack to write (.tar.zst; .tar.gz for gzip; .sqsh for a squashfs image); its manifest "
                   "is written beside it as OUTPUT.json.")
@click.option("--format", "fmt", type=click.Choice(["tar.zst", "tar.gz", "squashfs"]), default=None,
              help="tar.zst (zstd on every core here; each node unpacks it with tar and the zstd program), "
                   "tar.gz (gzip on one thread, for nodes without zstd) or squashfs (mounted on each node with "
                   "squashfuse; needs mksquashfs here). Default: from OUTPUT's name, else tar.zst.")
@click.option("--sign-key", "sign_key", default=None, type=click.Path(dir_okay=False),
              help="Sign the pack's provenance (an in-toto statement: its sha256, prefix, format and step "
                   "markers) with this Ed25519 private key: written as OUTPUT.intoto.jsonl; `launch --packed "
                   "OUTPUT --trusted-key KEY.pub` checks it before submitting.")
@valid_days_option
@click.option("--json", "as_json", is_flag=True, help="Print the manifest as JSON.")
def pack_cmd(prefix, output, fmt, as_json, sign_key=None, valid_days=None):
    """Pack a provisioned environment into one file, to reach many nodes (build once, pack once).

    \b
    The pack holds the prefix's files (its temporary folder and lock left out); its manifest
    records the file's sha256 and size, the prefix and the step markers it was made from.
    It unpacks at the same path (a venv is not relocatable), on each node's own disk:
    `envbuild launch --scheduler slurm --packed FILE` sends it with sbcast, and every node
    checks the sha256 before unpacking. A squashfs image (.sqsh) is not unpacked: each node
    mounts its checked copy read-only at the prefix (squashfuse) for the task.
      envbuild provision cpu-reference --target local --prefix /local/envs/cpu-reference
      envbuild pack --prefix /local/envs/cpu-reference -o cpu-reference.tar.zst
      envbuild pack --prefix /local/envs/cpu-reference -o cpu-reference.sqsh
    """
    from envbuild.flows.pack import PackRequest, pack

    days = _days(valid_days, sign_key)
    outcome = pack(PackRequest(prefix=prefix, output=output, fmt=fmt, sign_key=Path(sign_key) if sign_key else None,
                               valid_days=days))
    packed, signed, removed = outcome.packed, outcome.provenance, outcome.removed
    if as_json:
        emit_json(outcome.to_dict())
        return
    how = "mounts" if packed.image else "unpacks"
    console.print(f"{packed.archive}: {packed.format}, {packed.bytes} bytes, sha256 {packed.sha256}, "
                  f"{how} at {packed.prefix} ({len(packed.steps)} step marker(s) recorded)", markup=False)
    if signed:
        console.print(f"  provenance signed: {signed}", markup=False)
    if removed:
        console.print(f"  removed {removed}: the provenance of the pack this one replaced", markup=False)
