"""``envbuild plan``: the ordered steps a provision would run, with every decision's reason."""

from __future__ import annotations

import click

from envbuild.cli import cli
from envbuild.cli.options import recipe_argument, target_option
from envbuild.cli.output import console, emit_json


@cli.command("plan")
@recipe_argument(required=False)
@target_option()
@click.option("--facts", "facts_file", help="Node facts JSON (from `envbuild facts --json -o`).")
@click.option("--lock", "lock_file", help="Lockfile (default: $ENVBUILD_LOCKDIR's, else the shipped lock, if present).")
@click.option("--prefix", help="Environment prefix on the node.")
@click.option("--backend", type=click.Choice(["venv", "conda", "container"]),
              help="Override the recipe's environment kind (container: its image built on the node).")
@click.option("--base", metavar="IMAGE", help="--backend container: the image's base.")
@click.option("--engine-arg", "engine_args", multiple=True, metavar="ARG",
              help="--backend container: an extra option of the engine's build (repeatable).")
@click.option("--engine-env", "engine_env", multiple=True, metavar="NAME=VALUE",
              help="--backend container: environment of the engine's commands (repeatable).")
@click.option("--git-mirror", help="Folder with OWNER/NAME(.git) mirrors of GitHub repositories.")
@click.option("--wheelhouse", help="Folder of wheels used as pip find-links.")
@click.option("--data-mirror", "data_mirror", help="Folder of the recipe's data files (DIR/<file>), read on the node first.")
@click.option("--installer", type=click.Choice(["auto", "pip", "uv"]), default="auto", show_default=True,
              help="Package installs with uv (this machine's uv, pushed to the node) or pip; auto: uv "
                   "where the node can run it.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan(s) as JSON.")
def plan_cmd(recipe, target, facts_file, lock_file, prefix, backend, git_mirror, wheelhouse, as_json,
             base=None, engine_args=(), engine_env=(), data_mirror=None, installer="auto"):
    """Show the steps a provision of RECIPE (default: the embedded reference) would run.

    \b
    Pure: nothing is installed. Example:
      envbuild plan alpa-megatron --target azure-nd96
    """
    from envbuild.flows.plan import PlanRequest, plan

    res = plan(PlanRequest(target=target, recipe=recipe, facts_file=facts_file, lock_file=lock_file, prefix=prefix,
                           backend=backend, base=base, engine_args=tuple(engine_args), engine_env=tuple(engine_env),
                           git_mirror=git_mirror, wheelhouse=wheelhouse, data_mirror=data_mirror, installer=installer))
    plans = res.plans
    if as_json:
        emit_json([p.model_dump(by_alias=True) for p in plans] if len(plans) > 1
                  else plans[0].model_dump(by_alias=True))
    else:
        for one in plans:
            print_plan(one)
    if res.infeasible:  # the plan is printed, and the exit says what `check` says: infeasible
        click.echo(f"error: preflight: {res.recipe} is infeasible on {', '.join(res.infeasible)} "
                   f"(the plan above would be refused)", err=True)
        click.echo(f"hint: {res.check_command} lists every violated rule", err=True)
        return res.exit_code
    if res.refused:  # a step the recipe needs is refused: a provision would stop there (issue 49)
        for host, d in res.refused:
            click.echo(f"error: {host}: {d.subject} refused: {d.reason}", err=True)
        click.echo("hint: the plan above would stop at the refused step(s); fix the facts or the recipe "
                   "as each reason says", err=True)
        return res.exit_code
    return None


def print_plan(plan) -> None:
    from envbuild.cli.tables import FoldingTable as Table

    console.print(f"[bold]plan[/] {plan.recipe} on {plan.target} (host {plan.host}, "
                  f"facts {plan.facts_origin}) -> {plan.backend} at {plan.prefix}")
    preflight = plan.preflight()
    if preflight is not None:
        verdict = preflight.params
        console.print(("[green]preflight: feasible[/]" if verdict.feasible else "[red]preflight: INFEASIBLE[/]")
                      + (f" (errors: {', '.join(verdict.errors)})" if verdict.errors else "")
                      + (f" (warnings: {', '.join(verdict.warnings)})" if verdict.warnings else ""))
    if plan.lock_digest:
        console.print(f"lock digest {plan.lock_digest}")
    else:
        console.print("[yellow]no lockfile: packages from the recipe's specifiers, no hashes[/]")
    table = Table(show_lines=False)
    for col in ("#", "step", "what", "why"):
        table.add_column(col, overflow="fold")
    for i, step in enumerate(plan.steps, 1):
        table.add_row(str(i), step.id, step.title, _short(step.reason))
    console.print(table)
    if plan.decisions:
        dt = Table(title="decisions from facts")
        for col in ("subject", "outcome", "reason"):
            dt.add_column(col, overflow="fold")
        for d in plan.decisions:
            dt.add_row(d.subject, d.outcome, _short(d.reason, 160))
        console.print(dt)


def _short(text: str, limit: int = 110) -> str:
    """The first sentence of a reason, for the table (--json has the whole text)."""
    import re

    first = re.split(r"(?<=[a-z0-9)])\. (?=[A-Z])", " ".join(text.split()))[0]
    return first if len(first) <= limit else first[: limit - 1] + "…"
