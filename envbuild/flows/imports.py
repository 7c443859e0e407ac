"""The imports flow: the modules a recipe's entry scripts import, printed, written or checked.

``imports(ImportsRequest(...)) -> ImportsOutcome``: the recipe (or with ``every`` each shipped
recipe that names entry_scripts), its scripts read at their pinned commits in the git mirror
(``envbuild.scriptimports.generate``: ast, never run), and the fact's YAML returned for stdout,
written where ``out`` says (with ``every``: ``out/<recipe>.yaml``), or compared (``check``)
with that file or the shipped fact: CheckFailed (exit 1) naming each file out of date. Nothing
is written unless ``out`` names where, and never into an installed envbuild's package (the
next install or upgrade would drop it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from envbuild.errors import CheckFailed, InputError


@dataclass(frozen=True)
class ImportsRequest:
    """``recipe`` (a name or a YAML path), or ``every`` shipped recipe with entry_scripts;
    ``git_mirror`` the mirror folder; ``out`` the file (with ``every``: the folder) to write,
    None for stdout; ``check`` compare instead of writing."""

    git_mirror: Path
    recipe: str | None = None
    every: bool = False
    out: Path | None = None
    check: bool = False


@dataclass(frozen=True)
class ImportsWritten:
    """One fact file: the recipe, where, and whether its text changed (else left as it was)."""

    recipe: str
    path: Path
    changed: bool


@dataclass(frozen=True)
class ImportsOutcome:
    """``text``: the fact for stdout (no ``out``, no ``check``); ``written``: the files written
    or left unchanged."""

    text: str | None = None
    written: list[ImportsWritten] = field(default_factory=list)


def _refuse_package_path(out: Path) -> None:
    """An installed envbuild never writes into its own package tree."""
    from envbuild import shipped

    if shipped.INSTALLED and out.resolve().is_relative_to(shipped.PACKAGE):
        raise InputError(f"-o {out}: inside the installed envbuild package ({shipped.PACKAGE})",
                         hint="write the fact to a file of your own (-o FILE), or print it (no -o)")


def _recipes(request: ImportsRequest) -> list:
    """The recipes asked for, after the request's own checks."""
    from envbuild.recipes import all_recipes, load_recipe

    recipe = request.recipe
    if request.every == bool(recipe):
        raise InputError("name one RECIPE or --all", hint="envbuild imports RECIPE --git-mirror DIR")
    if request.every and request.out is None and not request.check:
        raise InputError("--all writes one file per recipe: name their folder with -o",
                         hint="envbuild imports --all --git-mirror DIR -o FOLDER")
    if request.out is not None and not request.check:
        _refuse_package_path(request.out)
    if recipe:
        return [load_recipe(recipe)]
    return [r for r in all_recipes() if r.entry_scripts]


def imports(request: ImportsRequest, *, wrote: Callable[[ImportsWritten], None] | None = None) -> ImportsOutcome:
    """Generate and print, write or check (see the module docstring); ``wrote`` is told of each
    file as it is written (or found unchanged). InputError for a bad request or a recipe without
    entry_scripts."""
    from envbuild.fsio import write_atomic
    from envbuild.scriptimports import dump, fact_path, generate

    out, every = request.out, request.every
    stale: list[str] = []
    written: list[ImportsWritten] = []
    printed = None
    for rec in _recipes(request):
        if not rec.entry_scripts:
            raise InputError(f"recipe {rec.name} names no entry_scripts",
                             hint="add entry_scripts: [{component: NAME, path: SCRIPT}] to the recipe")
        text = dump(generate(rec, request.git_mirror))
        path = (out / f"{rec.name}.yaml" if every else out) if out is not None else None
        if request.check:
            ref = path or fact_path(rec.name)
            if not ref.is_file() or ref.read_text() != text:
                stale.append(str(ref))
            continue
        if path is None:
            printed = (printed or "") + text
            continue
        old = path.read_text() if path.is_file() else None
        if old != text:
            write_atomic(path, text)
        written.append(ImportsWritten(recipe=rec.name, path=path, changed=old != text))
        if wrote is not None:
            wrote(written[-1])
    if stale:
        raise CheckFailed(f"out of date: {', '.join(stale)}",
                          hint="regenerate: envbuild imports --all --git-mirror DIR -o envbuild/recipes/imports "
                               "(in a checkout of envbuild), or RECIPE --git-mirror DIR -o FILE")
    return ImportsOutcome(text=printed, written=written)
