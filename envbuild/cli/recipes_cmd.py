"""``envbuild recipes`` and ``envbuild show``: list the shipped recipes, show one in full.

Both take shipped names (``alpa-megatron``) or paths to recipe YAML files; errors in a file
point at its line (``x.yaml:12: packages[3].version: required field is missing``).
"""

from __future__ import annotations

import click
from rich.markup import escape
from envbuild.cli.tables import FoldingTable as Table

from envbuild.cli import cli
from envbuild.cli.options import complete_recipe, recipe_argument
from envbuild.cli.output import console, emit_json


@cli.command("recipes")
@click.argument("recipes", nargs=-1, shell_complete=complete_recipe)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list (one object per recipe).")
def recipes_command(recipes: tuple[str, ...], as_json: bool) -> None:
    """List the shipped recipes (or the RECIPES given by name or path); * marks the default.

    \b
    Example:  envbuild recipes
              envbuild recipes --json
              envbuild recipes ./my-recipe.yaml
    """
    from envbuild.flows.recipes import RecipesRequest
    from envbuild.flows.recipes import recipes as list_recipes

    rows = list_recipes(RecipesRequest(recipes=tuple(recipes))).rows
    if as_json:
        emit_json(rows)
        return
    table = Table(title="envbuild recipes", title_justify="left")
    for col in ("name", "title", "python", "env", "targets"):
        table.add_column(col, overflow="fold", no_wrap=col in ("name", "python", "env"))
    for row in rows:
        name = row["name"] + (" *" if row["default"] else "")
        _row(table, name, row["title"], row["python"], row["environment"], ", ".join(row["targets"]))
    console.print(table)
    if any(r["default"] for r in rows):
        console.print("* default recipe")


def _source_text(src) -> str:  # noqa: ANN001 - a recipe Source, or None
    if src is None:
        return ""
    parts = [src.url]
    if src.ref:
        parts.append(f"ref {src.ref}")
    if src.sha:
        parts.append(f"@{src.sha[:12]}")
    if src.note:
        parts.append(f"({src.note})")
    return " ".join(parts)


def _version_text(pkg) -> str:  # noqa: ANN001 - a recipe Package
    text = pkg.version
    if pkg.cuda:
        text += f" [{pkg.cuda}]"
    if pkg.preinstalled:
        text += " (preinstalled)"
    if pkg.index:
        text += f"\nfrom {pkg.index}"
    return text


def _pin_text(src) -> str:  # noqa: ANN001 - a recipe GitSource
    pin = src.sha or f"UNVERIFIED: {src.unverified}"
    text = f"{src.url}\n{src.ref} @ {pin}"
    if src.requires_ancestors:
        text += "\ncontains " + ", ".join(a[:12] for a in src.requires_ancestors)
    return text


def _install_text(src) -> str:  # noqa: ANN001 - a recipe GitSource
    text = src.install
    if src.build_options:
        text += " " + " ".join(src.build_options)
    if src.build:
        text += "\nbuild: " + "; ".join(src.build)
    if src.env:
        text += "\nenv: " + " ".join(f"{k}={v}" for k, v in src.env.items())
    return text


def _deviation_status(d) -> str:
    if d.state == "open":
        return "OPEN: not handled yet"
    if d.state == "handled" and not d.test:
        return "handled by the recipe's own patch(es): " + ", ".join(d.handled_by) + " (applied and checked on the node)"
    if d.state == "handled":
        return "handled by " + ", ".join(d.handled_by) + "\ntested by " + ", ".join(d.test)
    return "unverified: names no code"


def _row(table: Table, *cells: str) -> None:
    table.add_row(*cells)  # data: the table's cells take no markup


def _say(text: str) -> None:
    console.print(escape(text))


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left", show_lines=True)
    for col in columns:
        table.add_column(col, overflow="fold")
    return table


def print_recipe(recipe) -> None:  # noqa: ANN001 - the Recipe of envbuild.flows.recipes.ShowOutcome
    """A readable summary: header, pins with sources and reasons, patches, deviations, benchmark."""
    env = recipe.environment
    where = env.base_image or env.conda_module or ""
    default = " (default)" if recipe.default else ""
    console.print(f"[bold]{escape(recipe.name)}[/bold]" + escape(f"{default}: {recipe.title}"))
    _say(recipe.description)
    _say(f"published: {_source_text(recipe.published)}")
    _say(f"python {recipe.python}, environment {env.kind}{' ' + where if where else ''}"
                  f"{', system site-packages' if env.system_site_packages else ''}"
                  f"{', pip ' + env.pip if env.pip else ''}"
                  f"{', setuptools ' + env.setuptools if env.setuptools else ''}; "
                  f"launcher {recipe.launcher}; targets {', '.join(recipe.targets)}")
    if env.source:
        _say(f"environment cited from: {_source_text(env.source)}")
    if recipe.resolve_as_of:
        _say(f"unpinned dependencies resolve as of {recipe.resolve_as_of}")
    if recipe.system_packages:
        _say("system packages: " + " ".join(recipe.system_packages))
    if recipe.env:
        _say("env: " + " ".join(f"{k}={v}" for k, v in recipe.env.items()))
    if recipe.packages:
        table = _table("packages", "name", "version", "why", "source")
        for pkg in recipe.packages:
            _row(table, pkg.name, _version_text(pkg), pkg.why, _source_text(pkg.source))
        console.print(table)
    if recipe.sources:
        table = _table("git sources", "name", "pin", "install", "why", "source")
        for src in recipe.sources:
            _row(table, src.name, _pin_text(src), _install_text(src), src.why, _source_text(src.source))
        console.print(table)
    if recipe.patches:
        table = _table("patches", "id", "kind", "where", "why", "source")
        for p in recipe.patches:
            where_text = f"{p.component}:{p.file}" + (f"\nwhen {p.when}" if p.when else "")
            _row(table, p.id, p.kind, where_text, p.why, _source_text(p.source))
        console.print(table)
    if recipe.data:
        table = _table("data (fetched, sha256 checked and recorded)", "name", "into", "sha256", "why", "source")
        for d in recipe.data:
            digest = d.sha256 or f"unknown ({d.unverified}): the first fetch's is recorded"
            into = f"{d.component}:{d.path}" + (f" (unpacked: {d.decompress})" if d.decompress else "")
            _row(table, d.name, f"{d.url}\n-> {into}", digest, d.why, _source_text(d.source))
        console.print(table)
    if recipe.deviations:
        table = _table("deviations from the published instructions", "id", "published", "problem",
                       "envbuild does", "status")
        for d in recipe.deviations:
            _row(table, d.id, d.published, d.problem, d.instead, _deviation_status(d))
        console.print(table)
    if recipe.import_check:
        _say("import check: " + ", ".join(recipe.import_check))
    bench = recipe.benchmark
    if bench:
        gate = (f"{'>=' if bench.higher_is_better else '<='} {bench.threshold:g} {bench.unit}".rstrip()
                if bench.threshold is not None else "no threshold")
        gpus = f", {bench.needs_gpus} GPU(s)" if bench.needs_gpus else ""
        console.print("[bold]benchmark[/bold] " + escape(f"({bench.parser}, {bench.metric}, {gate}{gpus}):"))
        _say(f"  {bench.command}")
        if bench.cwd:
            _say(f"  in {bench.cwd}")
        for k, v in bench.env.items():
            _say(f"  {k}={v}")
        if bench.target_env:
            _say("  from the target: " + ", ".join(bench.target_env))
        for folder in bench.fresh:
            _say(f"  removed before each run: {folder.path} ({folder.why})")
        for name, cmd in bench.variants.items():
            _say(f"  variant {name}: {cmd}")
        if bench.source:
            _say(f"  cited from: {_source_text(bench.source)}")
        if bench.published:
            unit = f" {bench.unit}" if bench.unit else ""
            _say(f"  published figure: {bench.published.value:g}{unit} ({bench.published.source})")
        if bench.why:
            _say(f"  {bench.why}")
    if recipe.resources:
        console.print("[bold]expected resource use[/bold] (per experiment; `check` holds the memory against the node):")
        for r in recipe.resources:
            gpu_mem = f" x {r.gpu_memory_gib:g} GiB" if r.gpu_memory_gib else " (GPU memory not stated)" if r.gpus else ""
            _say(f"  {r.experiment}: {r.gpus} GPU(s){gpu_mem}, host memory {r.host_memory_gib:g} GiB, disk "
                 f"{r.disk_gib:g} GiB, about {r.minutes:g} min; network: {r.network}")
            _say(f"    {r.basis}: {r.source}")
    else:
        _say("expected resource use: not stated")


@cli.command("show")
@recipe_argument(required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the full recipe as JSON.")
@click.option("--schema", "as_schema", is_flag=True, help="Print the recipe JSON Schema (all fields).")
def show_command(recipe: str | None, as_json: bool, as_schema: bool) -> None:
    """Show RECIPE (a shipped name or a YAML path): pins, sources, patches, deviations, benchmark.

    \b
    Example:  envbuild show alpa-megatron
              envbuild show opt-175b-azure --json
              envbuild show ./my-recipe.yaml
              envbuild show --schema
    """
    from envbuild.flows.recipes import ShowRequest, show

    res = show(ShowRequest(recipe=recipe, schema=as_schema))
    if as_json or res.recipe is None:
        emit_json(res.to_dict())
        return
    print_recipe(res.recipe)
