"""``envbuild render``: the plan as Ansible variables, a shell script, a Dockerfile build
context, an Apptainer definition or a CI workflow."""

from __future__ import annotations

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
@click.option("--facts", "facts_file", default=None,
              help="Node facts JSON (ansible, shell; default: the target's profile, live for local; "
              "every format: the nodes whose facts fill {inventory.*} patch placeholders).")
@click.option("--lock", "lock_file", default=None,
              help="Lockfile (default: $ENVBUILD_LOCKDIR's, else the shipped lock, if present).")
@click.option("--prefix", default=None, help="Environment prefix on the node (ansible, shell).")
@click.option("--wheelhouse", default=None, type=click.Path(),
              help="Folder of wheels: node formats use it as find-links; image formats copy the locked ones into the context.")
@click.option("--allow-unverified", "allow_unverified", multiple=True, metavar="NAME",
              help="Accept a package the lock has no verified hash for (repeat per package), as provision does.")
@click.option("--envbuild-source", "envbuild_source", default=None, metavar="SPEC",
              help="ci: where the workflow installs envbuild from, pinned: git+URL@COMMIT (40 hex) or a wheel's "
                   "URL#sha256=HEX (default: this envbuild checkout's HEAD at its git remote).")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
def render_cmd(recipe, target, fmt, out, base, facts_file, lock_file, prefix, wheelhouse, allow_unverified,
               envbuild_source, as_json):
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
    from envbuild.flows.render import RenderRequest, render

    res = render(RenderRequest(target=target, fmt=fmt, recipe=recipe, out=out, base=base, facts_file=facts_file,
                               lock_file=lock_file, prefix=prefix, wheelhouse=wheelhouse,
                               allow_unverified=tuple(allow_unverified), envbuild_source=envbuild_source))
    if as_json:
        emit_json({"format": fmt, **res.to_dict()})
    else:
        console.print(f"wrote {len(res.files)} files to {res.folder}" + (f" (base {res.base})" if res.base else ""))
        if not res.feasible:
            console.print(f"[red]preflight refuses {res.target}:[/] {res.summary}")
    return res.exit_code
