"""``envbuild imports``: print, write or check the modules a recipe's entry scripts import.

Thin: parses its options, calls the imports flow (``envbuild.flows.imports``: the fact printed,
written where ``-o`` says, or compared with that file or the shipped one), prints.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from envbuild.cli import cli
from envbuild.cli.options import recipe_argument
from envbuild.cli.output import err_console


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
    the CPU import proof (tests/testbed/test_import_proof.py) imports the modules of the shipped
    facts, envbuild/recipes/imports/<recipe>.yaml of a source checkout.

    \b
    Example: envbuild imports my-recipe.yaml --git-mirror /srv/mirrors -o my-recipe.imports.yaml
    Regenerate the shipped facts (in a checkout of envbuild):
      envbuild imports --all --git-mirror /srv/mirrors -o envbuild/recipes/imports
    """
    from envbuild.flows.imports import ImportsRequest, ImportsWritten, imports

    def wrote(w: ImportsWritten) -> None:
        err_console.print(f"imports: {w.recipe}: {'wrote' if w.changed else 'unchanged'} {w.path}",
                          markup=False, highlight=False)

    res = imports(ImportsRequest(git_mirror=git_mirror, recipe=recipe, every=every, out=out, check=check), wrote=wrote)
    if res.text is not None:
        sys.stdout.write(res.text)
