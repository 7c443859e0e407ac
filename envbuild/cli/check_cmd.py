"""``envbuild check``: preflight a recipe against a target (and node facts) before building."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import click
from pydantic import ValidationError
from rich.table import Table

from envbuild.cli import cli
from envbuild.cli.output import console, emit_json
from envbuild.compat.check import Verdict, preflight
from envbuild.errors import CheckFailed, InputError
from envbuild.facts.model import NodeFacts
from envbuild.facts.profile import from_target, refine
from envbuild.recipes import load_recipe
from envbuild.targets import load_target
from envbuild.targets.schema import Target


def _validate_facts(data: object, path: Path) -> list[NodeFacts]:
    items = data if isinstance(data, list) else [data]
    if not items:
        raise InputError(f"{path}: the facts list is empty", hint="give one facts object or a non-empty list")
    out = []
    for i, item in enumerate(items):
        try:
            out.append(NodeFacts.model_validate(item))
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "<top>"
            where = f"[{i}]." if isinstance(data, list) else ""
            raise InputError(f"{path}: {where}{field}: {err['msg']}",
                             hint="produce facts with `envbuild facts --json` (schema envbuild.facts/1)") from None
    return out


def load_facts_file(path: str | Path) -> list[NodeFacts]:
    """Facts JSON (one NodeFacts object or a list) -> list; uses envbuild.facts.load when present."""
    path = Path(path)
    try:
        shared = importlib.import_module("envbuild.facts.load")
    except ModuleNotFoundError:
        shared = None
    if shared is not None and hasattr(shared, "load_facts"):
        got = shared.load_facts(path)
        return list(got) if isinstance(got, (list, tuple)) else [got]
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"facts file {path} does not exist", hint="check the path") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not JSON: {exc.msg}",
                         hint="produce facts with `envbuild facts --json`") from None
    return _validate_facts(data, path)


def node_facts(target: Target, facts_path: str | None) -> list[NodeFacts]:
    """The facts to check against: file (refined by the profile), local gather, or the profile."""
    if facts_path:
        return [refine(target, f) for f in load_facts_file(facts_path)]
    if target.from_facts:
        try:
            gather = importlib.import_module("envbuild.facts.gather")
        except ModuleNotFoundError:
            gather = None
        if gather is None or not hasattr(gather, "gather_local"):
            raise InputError(f"target {target.name} needs live facts",
                             hint="pass --facts FILE (from `envbuild facts --json`)")
        return [gather.gather_local()]
    return [from_target(target)]


def print_verdict(v: Verdict) -> None:
    """Human output: a verdict line, then the table of violated rows."""
    style = "green" if v.feasible else "red"
    console.print(f"[{style}]{v.summary()}[/{style}]")
    if v.torch_reason:
        console.print(f"  torch variant: {v.torch_variant} ({v.torch_reason})")
    console.print(f"  facts: {v.origin}; {len(v.passed)} rule(s) passed")
    if not v.violations:
        return
    table = Table(show_lines=True)
    for col in ("severity", "rule", "message", "fix"):
        table.add_column(col, overflow="fold")
    for x in v.violations:
        sev = "[red]error[/red]" if x.severity == "error" else "[yellow]warning[/yellow]"
        table.add_row(sev, x.rule, x.message, x.fix)
    console.print(table)


@cli.command("check")
@click.argument("recipe")
@click.option("--target", "-t", "target_name", required=True, help="Target profile name or YAML path.")
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
    rec = load_recipe(recipe)
    tgt = load_target(target_name)
    verdicts = [preflight(rec, tgt, f) for f in node_facts(tgt, facts_path)]
    if as_json:
        dumped = [v.model_dump(mode="json") for v in verdicts]
        emit_json(dumped if len(verdicts) > 1 else dumped[0])
    else:
        for v in verdicts:
            print_verdict(v)
    bad = [v for v in verdicts if not v.feasible]
    if bad:
        rules = sorted({x.rule for v in bad for x in v.errors})
        raise CheckFailed(f"{rec.name} is infeasible on {tgt.name} "
                          f"({len(bad)} of {len(verdicts)} node(s)): {', '.join(rules)}",
                          hint="apply the fixes listed for each error rule, or pick another target")
