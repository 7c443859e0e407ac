"""``envbuild imports``: write or check the modules a recipe's entry scripts import.

Thin: loads the recipe, calls ``envbuild.scriptimports.generate`` against the git mirror,
writes (or compares with) ``envbuild/recipes/imports/<recipe>.yaml`` of a source checkout; an
installed envbuild only compares (``--check``): nothing is written into an installed package.
"""

from __future__ import annotations

from pathlib import Path

import click

from envbuild.cli import cli
from envbuild.cli.options import recipe_argument
from envbuild.cli.output import err_console
from envbuild.errors import CheckFailed, InputError


@cli.command("imports")
@recipe_argument(required=False)
@click.option("--all", "every", is_flag=True, help="Every shipped recipe that names entry_scripts.")
@click.option("--git-mirror", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder of git mirrors (OWNER/NAME[.git] or OWNER+NAME/); the scripts are read there.")
@click.option("--check", is_flag=True, help="Do not write; exit 1 if the committed file differs.")
def imports_cmd(recipe, every, git_mirror, check):
    """Read the imports of RECIPE's entry scripts at their pinned commits (ast, never run).

    \b
    Example: envbuild imports opt-175b-azure --git-mirror /work/.mirror
    The file envbuild/recipes/imports/<recipe>.yaml records repository, commit, script
    paths and modules; the CPU import proof (tests/test_import_proof.py) imports them.
    """
    from envbuild import shipped
    from envbuild.fsio import write_atomic
    from envbuild.recipes import all_recipes, load_recipe
    from envbuild.scriptimports import dump, fact_path, generate

    if every == bool(recipe):
        raise InputError("name one RECIPE or --all", hint="envbuild imports RECIPE --git-mirror DIR")
    if shipped.INSTALLED and not check:
        # the files are shipped facts of envbuild's source tree; an installed package is not one,
        # and the next install or upgrade would drop what was written there
        raise InputError(f"envbuild imports writes the shipped facts of a source checkout "
                         f"({shipped.SCRIPT_IMPORTS}); this envbuild is an installed package",
                         hint="run it from a checkout of envbuild (pip install -e .), or compare "
                              "with --check, which writes nothing")
    recipes = [r for r in all_recipes() if r.entry_scripts] if every else [load_recipe(recipe)]
    stale = []
    for rec in recipes:
        if not rec.entry_scripts:
            raise InputError(f"recipe {rec.name} names no entry_scripts",
                             hint="add entry_scripts: [{component: NAME, path: SCRIPT}] to the recipe")
        text = dump(generate(rec, git_mirror))
        path = fact_path(rec.name)
        old = path.read_text() if path.is_file() else None
        if check:
            if old != text:
                stale.append(str(path))
            continue
        if old != text:
            write_atomic(path, text)
        err_console.print(f"imports: {rec.name}: {'wrote' if old != text else 'unchanged'} {path}",
                          markup=False, highlight=False)
    if stale:
        raise CheckFailed(f"out of date: {', '.join(stale)}",
                          hint="regenerate: envbuild imports --all --git-mirror DIR")
