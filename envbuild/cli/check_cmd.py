"""``envbuild check``: preflight a recipe against a target (and node facts) before building."""

from __future__ import annotations

import click
from rich.text import Text
from envbuild.cli.tables import FoldingTable as Table

from envbuild.cli import cli
from envbuild.cli.options import recipe_argument, target_option
from envbuild.cli.output import console, emit_json


def print_verdict(v) -> None:  # noqa: ANN001 - a Verdict of envbuild.flows.check.CheckOutcome
    """Human output: a verdict line, then the table of violated rows."""
    style = "green" if v.feasible else "red"
    console.print(f"[{style}]{v.summary()}[/{style}]")
    if v.torch_reason:
        console.print(f"  torch variant: {v.torch_variant} ({v.torch_reason})")
    console.print(f"  facts: {v.origin}; {len(v.passed)} rule(s) passed")
    if v.origin.startswith("profile:"):
        console.print(f"  judged: the target profile's documented facts ({v.origin[len('profile:'):]}), not a node; "
                      "pass --facts FILE (envbuild facts on the node) to judge a node")
    for x in v.variants:
        console.print(f"  variant for this GPU: {x.recipe} ({x.title}): "
                      f"envbuild check {x.recipe} --target {' | '.join(x.targets)}")
    if not v.violations:
        return
    table = Table(show_lines=True)
    for col in ("severity", "rule", "message", "fix"):
        table.add_column(col, overflow="fold")
    for x in v.violations:
        sev = Text("error", style="red") if x.severity == "error" else Text("warning", style="yellow")
        table.add_row(sev, x.rule, x.message, x.fix)
    console.print(table)


@cli.command("check")
@recipe_argument()
@target_option(dest="target_name")
@click.option("--facts", "facts_path", type=click.Path(dir_okay=False),
              help="Node facts JSON (one object or a list: every node is checked).")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict(s) as JSON.")
def check(recipe: str, target_name: str, facts_path: str | None, as_json: bool) -> None:
    """Preflight RECIPE on TARGET: evaluate every compatibility rule, report every violation.

    \b
    Exit 0 when feasible, 1 when any error rule is violated, 2 for bad input.
    Example:  envbuild check alpa-megatron --target h100
              envbuild check opt-175b-azure -t azure-nd96 --facts nd96.json --json
    """
    from envbuild.flows.check import CheckRequest
    from envbuild.flows.check import check as preflight

    res = preflight(CheckRequest(recipe=recipe, target=target_name, facts_file=facts_path))
    if as_json:
        emit_json(res.to_json())
    else:
        for v in res.verdicts:
            print_verdict(v)
    failure = res.failure()
    if failure is not None:
        raise failure
