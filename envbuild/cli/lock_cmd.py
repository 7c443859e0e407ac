"""``envbuild lock``: write or check lockfiles (thin: parse, call ``envbuild.flows.lock``, print)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.markup import escape

from envbuild.cli import cli
from envbuild.cli.options import recipe_argument, target_option
from envbuild.cli.output import emit_json, err_console

if TYPE_CHECKING:
    from envbuild.flows.lock import LockNote


def _say(msg: str) -> None:
    err_console.print(f"[dim]lock:[/dim] {msg}", markup=True, highlight=False, soft_wrap=True)


def _note(note: LockNote) -> None:
    """A step of the lock flow, as it happens: its words, text from a file escaped, a verdict in red."""
    text = {"data": escape(note.text), "stale": "[red]stale[/red]",
            "failed": f"[red]failed[/red]: {note.text}"}.get(note.kind, note.text)
    _say(f"{note.pair}: {text}")


@cli.command("lock")
@recipe_argument(required=False)
@target_option(required=False)
@click.option("--all", "every", is_flag=True, help="Every shipped recipe x each of its targets.")
@click.option("--check", is_flag=True, help="Do not resolve; fail (exit 1) if the lock is stale "
              "(with --git-mirror: also if a pinned commit or required ancestor is gone there).")
@click.option("--git-mirror", type=click.Path(file_okay=False, path_type=Path),
              help="Folder of git mirrors (OWNER/NAME[.git]); also $ENVBUILD_GIT_MIRROR.")
@click.option("--wheelhouse", type=click.Path(file_okay=False, path_type=Path),
              help="Folder of wheels used as find-links (their sha256 is recorded).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Lockfile path (default LOCKDIR/<recipe>/<target>.lock).")
@click.option("--lockdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder of lockfiles to write or check (default: $ENVBUILD_LOCKDIR, else in a checkout "
                   "its lockfiles/, the shipped locks, and for an installed envbuild $ENVBUILD_HOME/locks; "
                   "never the installed package). --check reads the lock provision would take: there, "
                   "else the shipped one.")
@click.option("--format", "fmt", type=click.Choice(["envbuild", "pylock", "requirements"]),
              default="envbuild", show_default=True,
              help="pylock: PEP 751 pylock.toml; requirements: a hashed requirements.txt (both from "
                   "the existing, up-to-date lock; -o writes a file, else stdout).")
@click.option("--export-form", "form", type=click.Choice(["url", "index"]), default="url", show_default=True,
              help="requirements: url names a file of an index other than PyPI by its URL; index writes "
                   "name==version with its hashes and that index as --extra-index-url (PyPI: the installer's "
                   "own index, a site's proxy).")
@click.option("--upgrade", is_flag=True, help="Resolve every package afresh (by default a re-lock keeps "
              "the existing lock's pins wherever the recipe allows, as uv does).")
@click.option("-P", "--upgrade-package", "upgrade_packages", multiple=True, metavar="NAME",
              help="Let NAME move to the newest version the recipe allows, keeping every other pin "
                   "(repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def lock_cmd(recipe, target, every, check, git_mirror, wheelhouse, output, lockdir, fmt, form, upgrade,
             upgrade_packages, as_json):
    """Pin every package (exact version + sha256) and git commit of a recipe for a target.

    \b
    envbuild lock alpa-megatron --target azure-nd96 --git-mirror /srv/mirror
    envbuild lock alpa-megatron --target azure-nd96 --check
    envbuild lock --all --check --git-mirror /srv/mirror   # also re-verify every git pin
    envbuild lock --all --check
    envbuild lock my-recipe.yaml --target local --lockdir ~/locks   # then ENVBUILD_LOCKDIR=~/locks
    envbuild lock my-recipe.yaml --target local   # installed: $ENVBUILD_HOME/locks, found by provision
    envbuild lock cpu-reference --target local --format pylock --wheelhouse /opt/wheels -o pylock.toml
    envbuild lock my-recipe.yaml --target local --upgrade-package tqdm   # the other pins stay

    A re-lock keeps the existing lock's pins wherever the recipe allows (uv's semantics) and
    says which pins moved and why; --upgrade resolves everything afresh.
    """
    from envbuild.flows.lock import LockRequest, lock

    res = lock(LockRequest(recipe=recipe, target=target, every=every, check=check, git_mirror=git_mirror,
                           wheelhouse=wheelhouse, output=output, lockdir=lockdir, fmt=fmt, form=form, upgrade=upgrade,
                           upgrade_packages=tuple(upgrade_packages)), say=_note)
    if res.export:
        if res.text is not None:
            click.echo(res.text, nl=False)
        return
    if as_json:
        emit_json(res.to_dict())
    elif not check:
        for e in res.results:
            if e["ok"]:
                click.echo(e["path"])
    failure = res.failure()
    if failure is not None:
        raise failure
