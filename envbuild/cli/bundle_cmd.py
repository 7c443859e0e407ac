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
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bundle_cmd(recipe, target, facts_file, lock_file, wheelhouse, git_mirror, data_mirror, prefix, output, sign_key,
               as_json, image_tar=None, offline=False, valid_days=None):
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
    from envbuild import rundir
    from envbuild.bundle.pack import make_bundle, manifest_summary, node_plans
    from envbuild.catalog import resolve as resolve_file
    from envbuild.errors import CheckFailed, InputError
    from envbuild.inputs import find_lock, lock_source, node_facts, recipe_and_target
    from envbuild.recipes import DATA as RECIPES
    from envbuild.targets import DATA as TARGETS

    days = _days(valid_days, sign_key)
    rec, tgt = recipe_and_target(recipe, target)
    for name, value in (("--wheelhouse", wheelhouse), ("--git-mirror", git_mirror), ("--data-mirror", data_mirror)):
        if value and not Path(value).is_dir():
            raise InputError(f"{name} {value}: no such folder", hint=f"pass an existing folder to {name}")
    lock = find_lock(rec, tgt, lock_file)
    path = lock_source(rec, tgt, lock_file)
    if lock is None:
        raise CheckFailed(f"no lockfile at {path}: a bundle packs what a lock names",
                          hint=f"lock first: envbuild lock {rec.name} --target {tgt.name}")
    facts = node_facts(tgt, facts_file)
    plans = node_plans(rec, tgt, facts, lock, prefix)
    recipe_file = resolve_file(recipe or rec.name, RECIPES, "recipe")
    target_file = resolve_file(target, TARGETS, "target")
    say = (lambda _m: None) if as_json else (lambda m: console.print(m, markup=False))
    from envbuild.bundle.provenance import load_key, utc_now

    if sign_key:  # an unusable key is refused before anything is packed
        load_key(Path(sign_key), private=True)
    started = utc_now()
    packed = make_bundle(rec, recipe_file, target_file, lock, path.read_text(), plans, Path(output), arch=tgt.platform.arch,
                         wheelhouse=Path(wheelhouse) if wheelhouse else None,
                         git_mirror=Path(git_mirror) if git_mirror else None,
                         data_mirror=Path(data_mirror) if data_mirror else None,
                         build_cache=rundir.envbuild_home() / "cache" / "wheels", progress=say,
                         image_tar=image_tar, offline=offline)
    m = packed.manifest
    result = {"bundle": str(packed.path), "sha256": packed.sha256, "bytes": packed.size,
              "recipe": rec.name, "target": tgt.name, "kinds": manifest_summary(m),
              "nodes": [p.host for p in plans],
              "omitted": [o.model_dump() for o in m.omitted],
              "images": [i.model_dump() for i in m.images], "offline": m.is_offline,
              "needs_network": [n.model_dump() for n in m.needs_network], "origins": packed.origins}
    if sign_key:
        result["provenance"] = str(_sign(packed, rec, tgt, recipe_file, target_file, path, Path(sign_key), started,
                                         days))
    else:  # an envelope left beside the path by an earlier signed bundle names that file, not this one
        from envbuild.bundle.provenance import envelope_path

        stale = envelope_path(packed.path)
        if stale.is_file():
            stale.unlink()
            result["removed"] = [str(stale)]
            say(f"  removed {stale}: the provenance of the bundle this one replaced")
    if as_json:
        emit_json(result)
        return
    console.print(f"bundle {packed.path}: {packed.size / 2**20:.1f} MiB, sha256 {packed.sha256}, "
                  f"planned for {len(plans)} node(s): {', '.join(p.host for p in plans)}", markup=False)
    for kind, row in result["kinds"].items():
        console.print(f"  {kind:<9} {row['files']:>4} file(s) {row['bytes'] / 2**20:8.1f} MiB", markup=False)
    for o in m.omitted:
        console.print(f"  not packed: {o.name} ({o.why})", markup=False)
    for i in m.images:
        console.print(f"  image {i.name} (ID {i.id[:12]}): loaded on the node instead of pulled", markup=False)
    console.print("offline: yes: the node needs nothing beyond the bundle" if m.is_offline else
                  f"offline: no: the node still needs the network for {len(m.needs_network)} thing(s):", markup=False)
    for n in m.needs_network:
        console.print(f"  - {n.line()}", markup=False)
    if sign_key:
        console.print(f"  provenance signed: {result['provenance']}", markup=False)


def _sign(packed, rec, tgt, recipe_file, target_file, lock_path, key: Path, started: str, days: float) -> Path:
    """The bundle's signed in-toto statement, written beside it (envbuild.bundle.provenance)."""
    from envbuild import __version__
    from envbuild.bundle.provenance import sign, statement, utc_now, write_envelope
    from envbuild.fsio import sha256_file
    from envbuild.shipped import checkout_commit

    inputs = {f"recipe:{Path(recipe_file).name}": sha256_file(Path(recipe_file)),
              f"lock:{Path(lock_path).name}": sha256_file(Path(lock_path))}
    if target_file:
        inputs[f"target:{Path(target_file).name}"] = sha256_file(Path(target_file))
    stmt = statement(packed.path.name, packed.sha256, recipe=rec.name, target=tgt.name,
                     lock_digest=packed.manifest.lock_digest, inputs=inputs,
                     git=[(g.url, g.sha) for g in packed.manifest.git], envbuild_version=__version__,
                     envbuild_commit=checkout_commit(), started=started, finished=utc_now(), valid_days=days)
    return write_envelope(packed.path, sign(stmt, key))


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
    from envbuild.bundle import envpack
    from envbuild.bundle.provenance import envelope_path, load_key, utc_now

    days = _days(valid_days, sign_key)
    if sign_key:  # an unusable key is refused before anything is packed
        load_key(Path(sign_key), private=True)
    started = utc_now()
    packed = envpack.pack(prefix, output, fmt)
    signed = removed = None
    if sign_key:
        signed = envpack.sign(packed, Path(sign_key), started, utc_now(), valid_days=days)
    elif envelope_path(Path(packed.archive)).is_file():  # it names the pack this one replaced
        removed = envelope_path(Path(packed.archive))
        removed.unlink()
    if as_json:
        emit_json({**packed.manifest(), "provenance": str(signed) if signed else None,
                   "removed": [str(removed)] if removed else []})
        return
    how = "mounts" if packed.image else "unpacks"
    console.print(f"{packed.archive}: {packed.format}, {packed.bytes} bytes, sha256 {packed.sha256}, "
                  f"{how} at {packed.prefix} ({len(packed.steps)} step marker(s) recorded)", markup=False)
    if signed:
        console.print(f"  provenance signed: {signed}", markup=False)
    if removed:
        console.print(f"  removed {removed}: the provenance of the pack this one replaced", markup=False)
