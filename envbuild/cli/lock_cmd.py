"""``envbuild lock``: write or check lockfiles (thin: parse, call envbuild.lock, print)."""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.markup import escape

from envbuild.cli import cli
from envbuild.cli.options import recipe_argument, target_option
from envbuild.cli.output import emit_json, err_console
from envbuild.errors import CheckFailed, EnvbuildError, InputError
from envbuild.lock import (check_lock_file, default_lockdir, ensure_target, git_mirror_dir, locate_lock,
                           lock_path, writable_lock, write_lock)
from envbuild.recipes import all_recipes, load_recipe
from envbuild.targets import load_target


def _say(msg: str) -> None:
    err_console.print(f"[dim]lock:[/dim] {msg}", markup=True, highlight=False, soft_wrap=True)


def _pairs(recipe: str | None, target: str | None, every: bool):
    if every:
        if recipe or target:
            raise InputError("--all takes no RECIPE and no --target",
                             hint="use `envbuild lock --all` or `envbuild lock RECIPE --target T`")
        return [(r, load_target(t)) for r in all_recipes() for t in r.targets]
    if not recipe:
        raise InputError("missing RECIPE", hint="envbuild lock RECIPE --target TARGET (or --all)")
    rec = load_recipe(recipe)
    if not target:
        raise InputError(f"missing --target for recipe {rec.name}",
                         hint=f"its targets are: {', '.join(rec.targets) or '(none)'}")
    tgt = load_target(target)
    ensure_target(rec, tgt)
    return [(rec, tgt)]


def _export(pairs, fmt: str, wheelhouse, output, lockdir, form: str) -> None:
    """The up-to-date lock of one recipe x target in another format; a wheelhouse is named
    relative to the file written (or to this folder, for stdout), never by its absolute path."""
    import os

    from envbuild.fsio import write_atomic
    from envbuild.lock.export import export, pylock_name

    if len(pairs) != 1:
        raise InputError("--format exports one lock", hint="name RECIPE and --target, not --all")
    if output and fmt == "pylock":
        pylock_name(output.name)
    rec, tgt = pairs[0]
    lock = check_lock_file(locate_lock(rec.name, tgt.name, lockdir), rec, tgt)
    base = (output.resolve().parent if output else Path.cwd().resolve())
    text = export(lock, fmt, os.path.relpath(wheelhouse.resolve(), base) if wheelhouse else None, form)
    if output:
        write_atomic(output, text)
        _say(f"{rec.name}/{tgt.name}: wrote {output} ({fmt})")
    else:
        click.echo(text, nl=False)


def _unhashed(lock, path: Path, rec, tgt) -> list[str]:
    """Each file the lock could not hash, with the commands that fill it, said and returned."""
    from envbuild.lock.serialize import regenerate_command
    from envbuild.lock.unhashed import header_command, notes

    command = header_command(path.read_text()) if path.is_file() else None
    said = notes(lock, command or regenerate_command(rec.name, tgt.name, git_mirror=bool(lock.git)))
    for line in said:
        _say(f"{rec.name}/{tgt.name}: {escape(line)}")
    return said


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
    from envbuild.lock.keep import Upgrade

    pairs = _pairs(recipe, target, every)
    if form != "url" and fmt != "requirements":
        raise InputError("--export-form chooses how a requirements export names its files",
                         hint="use it with --format requirements")
    if (upgrade or upgrade_packages) and (check or fmt != "envbuild"):
        raise InputError("--upgrade and --upgrade-package re-lock; --check and --format do not",
                         hint="drop --check/--format, or drop the upgrade options")
    moving = Upgrade.of(upgrade, upgrade_packages)
    if fmt != "envbuild":
        _export(pairs, fmt, wheelhouse, output, lockdir, form)
        return
    if output and len(pairs) > 1:
        raise InputError("-o/--output names one file but --all writes many", hint="use --lockdir")
    mirror = git_mirror_dir(git_mirror)  # --check with a mirror re-verifies every git pin there

    def where(rec, tgt) -> Path:
        if check:  # the lock provision would take
            return output or locate_lock(rec.name, tgt.name, lockdir)
        return writable_lock(output or lock_path(rec.name, tgt.name, default_lockdir(lockdir)))

    paths = [where(rec, tgt) for rec, tgt in pairs]  # a refused path: before anything is resolved
    results, failures = [], []
    for (rec, tgt), path in zip(pairs, paths):
        started = time.monotonic()
        entry = {"recipe": rec.name, "target": tgt.name, "path": str(path)}
        if check:
            notices: list[str] = []
            entry["notices"] = notices
            name = f"{rec.name}/{tgt.name}"
            try:
                held = check_lock_file(path, rec, tgt, git_mirror=mirror,
                                       progress=lambda m, n=name, acc=notices: (acc.append(m), _say(f"{n}: {m}")))
                entry.update(ok=True, problems=[])
                _say(f"{rec.name}/{tgt.name}: up to date" + (" (git pins re-verified in the mirror)"
                                                             if mirror else ""))
                entry["unhashed"] = _unhashed(held, path, rec, tgt)
            except CheckFailed as exc:
                entry.update(ok=False, problems=exc.message.split("\n  - ")[1:] or [exc.message])
                failures.append(exc)
                _say(f"{rec.name}/{tgt.name}: [red]stale[/red]")
            results.append(entry)
            continue
        _say(f"{rec.name}/{tgt.name}: locking")
        try:
            lock, changed, moves = write_lock(rec, tgt, path, git_mirror=mirror, wheelhouse=wheelhouse,
                                              progress=lambda m, n=f"{rec.name}/{tgt.name}": _say(f"{n}: {m}"),
                                              upgrade=moving)
        except EnvbuildError as exc:
            if not every:
                raise
            failures.append(exc)
            entry.update(ok=False, problems=[str(exc)])
            results.append(entry)
            _say(f"{rec.name}/{tgt.name}: [red]failed[/red]: {exc}")
            continue
        unverified = [p.name for p in lock.packages if not p.verified] + \
                     [g.name for g in lock.git if not g.verified]
        entry.update(ok=True, changed=changed, packages=len(lock.packages), git=len(lock.git),
                     unverified=unverified, seconds=round(time.monotonic() - started, 1),
                     moved=[m.as_dict() for m in moves], unhashed=_unhashed(lock, path, rec, tgt))
        results.append(entry)
        for m in moves:
            _say(f"{rec.name}/{tgt.name}: {escape(m.line())}")
        _say(f"{rec.name}/{tgt.name}: {'wrote' if changed else 'unchanged'} {path} "
             f"({len(lock.packages)} packages, {len(lock.git)} git, {len(unverified)} unverified)")
    if as_json:
        emit_json({"check": check, "ok": not failures, "results": results})
    elif not check:
        for e in results:
            if e["ok"]:
                click.echo(e["path"])
    if failures:
        if len(failures) == 1 and not every:
            raise failures[0]
        lines = [f"{e['recipe']}/{e['target']}: {p}" for e in results if not e["ok"] for p in e["problems"]]
        raise CheckFailed(f"{len(failures)} of {len(results)} lock(s) "
                          f"{'stale' if check else 'failed'}:\n  - " + "\n  - ".join(lines),
                          hint="regenerate with `envbuild lock --all` (or per recipe with --target)")
