"""``envbuild imports``: print, write or check the modules a recipe's entry scripts import.

Thin: loads the recipe, calls ``envbuild.scriptimports.generate`` against the git mirror and
prints the fact (stdout), writes it where ``-o`` says, or compares it (``--check``) with that
file or the shipped one. Nothing is written unless ``-o`` names where, and never into an
installed envbuild's package (the next install or upgrade would drop it).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from envbuild.cli import cli
from envbuild.cli.options import recipe_argument
from envbuild.cli.output import err_console
from envbuild.errors import CheckFailed, InputError


def _refuse_package_path(out: Path) -> None:
    """An installed envbuild never writes into its own package tree."""
    from envbuild import shipped

    if shipped.INSTALLED and out.resolve().is_relative_to(shipped.PACKAGE):
        raise InputError(f"-o {out}: inside the installed envbuild package ({shipped.PACKAGE})",
                         hint="write the fact to a file of your own (-o FILE), or print it (no -o)")


@cli.command("imports")
@recipe_argument(required=False)
@click.option("--all", "every", is_flag=True, help="Every shipped recipe that names entry_scripts "
              "(-o names a folder: one <recipe>.yaml each).")
@click.option("--git-mirror", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder of git mirrors (OWNER/NAME[.git] or OWNER+NAME/); the scripts are read there.")
@click.option("-o", "--output", "out", type=click.Path(path_type=Path), default=None,
              help="Write the fact to FILE (with --all: FOLDER/<recipe>.yaml); default: stdout.")
@click.option("--check", is_flag=True, help="Do not write; exit 1 if the file (-o, else the shipped "
              "fact of the recipe) differs.")
def imports_cmd(recipe, every, git_mirror, out, check):
    """Read the imports of RECIPE's entry scripts at their pinned commits (ast, never run).

    Prints the fact (repository, commit, script paths and modules) unless -o names a file;
    the CPU import proof (tests/test_import_proof.py) imports the modules of the shipped
    facts, envbuild/recipes/imports/<recipe>.yaml of a source checkout.

    \b
    Example: envbuild imports my-recipe.yaml --git-mirror /srv/mirrors -o my-recipe.imports.yaml
    Regenerate the shipped facts (in a checkout of envbuild):
      envbuild imports --all --git-mirror /srv/mirrors -o envbuild/recipes/imports
    """
    from envbuild.fsio import write_atomic
    from envbuild.recipes import all_recipes, load_recipe
    from envbuild.scriptimports import dump, fact_path, generate

    if every == bool(recipe):
        raise InputError("name one RECIPE or --all", hint="envbuild imports RECIPE --git-mirror DIR")
    if every and out is None and not check:
        raise InputError("--all writes one file per recipe: name their folder with -o",
                         hint="envbuild imports --all --git-mirror DIR -o FOLDER")
    if out is not None and not check:
        _refuse_package_path(out)
    recipes = [r for r in all_recipes() if r.entry_scripts] if every else [load_recipe(recipe)]
    stale = []
    for rec in recipes:
        if not rec.entry_scripts:
            raise InputError(f"recipe {rec.name} names no entry_scripts",
                             hint="add entry_scripts: [{component: NAME, path: SCRIPT}] to the recipe")
        text = dump(generate(rec, git_mirror))
        path = (out / f"{rec.name}.yaml" if every else out) if out is not None else None
        if check:
            ref = path or fact_path(rec.name)
            if not ref.is_file() or ref.read_text() != text:
                stale.append(str(ref))
            continue
        if path is None:
            sys.stdout.write(text)
            continue
        old = path.read_text() if path.is_file() else None
        if old != text:
            write_atomic(path, text)
        err_console.print(f"imports: {rec.name}: {'wrote' if old != text else 'unchanged'} {path}",
                          markup=False, highlight=False)
    if stale:
        raise CheckFailed(f"out of date: {', '.join(stale)}",
                          hint="regenerate: envbuild imports --all --git-mirror DIR -o envbuild/recipes/imports "
                               "(in a checkout of envbuild), or RECIPE --git-mirror DIR -o FILE")
