"""``envbuild render``: the plan as Ansible variables, a shell script, a Dockerfile build
context, an Apptainer definition or a CI workflow."""

from __future__ import annotations

from pathlib import Path

import click

from envbuild.cli import cli
from envbuild.cli.options import recipe_argument, target_option
from envbuild.cli.output import console, emit_json


@cli.command("render")
@recipe_argument(required=False)
@target_option()
@click.option("--format", "fmt", required=True,
              type=click.Choice(["ansible", "dockerfile", "apptainer", "shell", "ci"]), help="What to write.")
@click.option("-o", "--output", "--out", "out", default=None, type=click.Path(),
              help="Folder to write (default: containers/<recipe>/<target>/<format>); --out is the old spelling.")
@click.option("--base", default=None, help="Base image (dockerfile, apptainer, ci; default: from the recipe).")
@click.option("--facts", "facts_file", default=None, help="Node facts JSON (ansible, shell; default: the target's profile, live for local; "
              "every format: the nodes whose facts fill {inventory.*} patch placeholders).")
@click.option("--lock", "lock_file", default=None, help="Lockfile (default: $ENVBUILD_LOCKDIR's, else the shipped lock, if present).")
@click.option("--prefix", default=None, help="Environment prefix on the node (ansible, shell).")
@click.option("--wheelhouse", default=None, type=click.Path(),
              help="Folder of wheels: node formats use it as find-links; image formats copy the locked ones into the context.")
@click.option("--allow-unverified", "allow_unverified", multiple=True, metavar="NAME",
              help="Accept a package the lock has no verified hash for (repeat per package), as provision does.")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
def render_cmd(recipe, target, fmt, out, base, facts_file, lock_file, prefix, wheelhouse, allow_unverified, as_json):
    """Write RECIPE's plan for TARGET in FORMAT (default recipe: the embedded reference).

    \b
    Examples:
      envbuild render cpu-reference --target local --format dockerfile -o build/ctx
      envbuild render alpa-megatron --target azure-nd96 --format apptainer
      envbuild render cpu-reference --target local --format shell -o /tmp/sh && bash /tmp/sh/run.sh
    Exit 0 when written; 1 when written but preflight refuses the target (the render stops at
    its first command), or nothing written because a package has no verified hash in the lock
    and was not accepted by --allow-unverified NAME (an image build checks hashes as provision
    does); 2 bad input.
    """
    from envbuild.inputs import find_lock, node_facts, recipe_and_target
    from envbuild.lock.serialize import image_lock_text
    from envbuild.render.context import write
    from envbuild.render.formats import IMAGE_FORMATS, render

    rec, tgt = recipe_and_target(recipe, target)
    lock = find_lock(rec, tgt, lock_file)
    lock_text = image_lock_text(lock, rec.name, tgt.name) if lock is not None else None
    facts = None if fmt in IMAGE_FORMATS else node_facts(tgt, facts_file)[0]
    from envbuild.plan.placeholders import inventory_values  # {inventory.*} patches: from --facts

    inventory = inventory_values(node_facts(tgt, facts_file)) if facts_file else None
    folder = Path(out or f"containers/{rec.name}/{tgt.name}/{fmt}")
    res = render(fmt, rec, tgt, lock, lock_text=lock_text, facts=facts, base=base,
                 wheelhouse=wheelhouse, prefix=prefix,
                 run_dir=str((folder / "run").resolve()), cache_dir=str((folder / "cache").resolve()),
                 inventory=inventory)
    from envbuild.provision.replan import refuse_unverified

    refuse_unverified(res.plan, list(allow_unverified))  # before a file is written
    written = write(res.context, folder, wheelhouse=Path(wheelhouse) if wheelhouse else None)
    if as_json:
        emit_json({"format": fmt, "recipe": rec.name, "target": tgt.name, "out": str(folder),
                   "files": written, "feasible": res.feasible, "preflight": res.summary,
                   "base": res.base, "lock_sha256": res.plan.lock_digest})
    else:
        console.print(f"wrote {len(written)} files to {folder}" + (f" (base {res.base})" if res.base else ""))
        if not res.feasible:
            console.print(f"[red]preflight refuses {tgt.name}:[/] {res.summary}")
    return 0 if res.feasible else 1
