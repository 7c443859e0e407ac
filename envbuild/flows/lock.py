"""The lock flow: a recipe's lockfile written, checked, or exported in another format.

``lock(LockRequest(...), say=...) -> LockOutcome``: the recipe x target pairs (one, or with
``every`` each shipped recipe x each of its targets), then one of:

- ``fmt`` pylock or requirements: the up-to-date lock of the one pair exported
  (``envbuild.lock.export``), written to ``output`` or returned for stdout;
- ``check``: the lock provision would take (``output``, else ``locate_lock``) checked against
  the recipe without resolving (with ``git_mirror``: every git pin re-verified there);
- else: each lock resolved and written (``envbuild.lock.write_lock``), keeping the old pins
  wherever the recipe allows unless ``upgrade``/``upgrade_packages`` say otherwise.

Every path is decided (and a refused one refused) before anything is resolved. ``say`` is told
each step as it happens (``LockNote``). A failure of one pair under ``every`` (and any stale
lock) is collected; the caller shows the outcome, then ends with ``failure()``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from envbuild.errors import CheckFailed, EnvbuildError, InputError
from envbuild.lock.keep import Upgrade


@dataclass(frozen=True)
class LockRequest:
    """``recipe`` and ``target`` (names or YAML paths), or ``every`` shipped pair; ``check``
    instead of locking; ``git_mirror``, ``wheelhouse``; ``output`` the one lock (or export)
    file; ``lockdir`` the folder of locks; ``fmt`` envbuild, pylock or requirements; ``form``
    how a requirements export names its files (url, index); ``upgrade`` everything or
    ``upgrade_packages`` by name."""

    recipe: str | None = None
    target: str | None = None
    every: bool = False
    check: bool = False
    git_mirror: Path | None = None
    wheelhouse: Path | None = None
    output: Path | None = None
    lockdir: Path | None = None
    fmt: str = "envbuild"
    form: str = "url"
    upgrade: bool = False
    upgrade_packages: tuple[str, ...] = ()


@dataclass(frozen=True)
class LockNote:
    """One step said as it happens, for ``pair`` (recipe/target). ``kind``: ``progress`` (the
    lock layer's and this flow's own words), ``data`` (text read from a lock or a recipe, to show
    as written), ``stale`` (a checked lock no longer fits), ``failed`` (``text``: the error)."""

    pair: str
    text: str = ""
    kind: str = "progress"


@dataclass
class LockOutcome:
    """``results``: one entry per pair (the --json ``results``); ``failures``: the errors
    collected; ``export``: an export was asked, its ``text`` for stdout (None: written)."""

    check: bool
    every: bool
    results: list[dict[str, Any]] = field(default_factory=list)
    failures: list[EnvbuildError] = field(default_factory=list)
    export: bool = False
    text: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "ok": not self.failures, "results": self.results}

    def failure(self) -> EnvbuildError | None:
        """The error the command ends with once the outcome is shown: one pair's own, or the
        count of stale (failed) locks with each problem."""
        if not self.failures:
            return None
        if len(self.failures) == 1 and not self.every:
            return self.failures[0]
        lines = [f"{e['recipe']}/{e['target']}: {p}" for e in self.results if not e["ok"] for p in e["problems"]]
        return CheckFailed(f"{len(self.failures)} of {len(self.results)} lock(s) "
                           f"{'stale' if self.check else 'failed'}:\n  - " + "\n  - ".join(lines),
                           hint="regenerate with `envbuild lock --all` (or per recipe with --target)")


Say = Callable[[LockNote], None]


def _quiet(note: LockNote) -> None:
    pass


def _pairs(request: LockRequest) -> list:
    from envbuild.lock import ensure_target
    from envbuild.recipes import all_recipes, load_recipe
    from envbuild.targets import load_target

    recipe, target = request.recipe, request.target
    if request.every:
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


def _export(request: LockRequest, pairs: list, say: Say) -> LockOutcome:
    """The up-to-date lock of one recipe x target in another format; a wheelhouse is named
    relative to the file written (or to this folder, for stdout), never by its absolute path."""
    from envbuild.fsio import write_atomic
    from envbuild.lock import check_lock_file, locate_lock
    from envbuild.lock.export import export, pylock_name

    output, wheelhouse, fmt = request.output, request.wheelhouse, request.fmt
    if len(pairs) != 1:
        raise InputError("--format exports one lock", hint="name RECIPE and --target, not --all")
    if output and fmt == "pylock":
        pylock_name(output.name)
    rec, tgt = pairs[0]
    lock = check_lock_file(locate_lock(rec.name, tgt.name, request.lockdir), rec, tgt)
    base = (output.resolve().parent if output else Path.cwd().resolve())
    text = export(lock, fmt, os.path.relpath(wheelhouse.resolve(), base) if wheelhouse else None, request.form)
    outcome = LockOutcome(check=request.check, every=request.every, export=True)
    if not output:
        outcome.text = text
        return outcome
    write_atomic(output, text)
    say(LockNote(f"{rec.name}/{tgt.name}", f"wrote {output} ({fmt})"))
    return outcome


def _unhashed(lock, path: Path, rec, tgt, say: Say) -> list[str]:
    """Each file the lock could not hash, with the commands that fill it, said and returned."""
    from envbuild.lock.serialize import regenerate_command
    from envbuild.lock.unhashed import header_command, notes

    command = header_command(path.read_text()) if path.is_file() else None
    said = notes(lock, command or regenerate_command(rec.name, tgt.name, git_mirror=bool(lock.git)))
    for line in said:
        say(LockNote(f"{rec.name}/{tgt.name}", line, "data"))
    return said


def _check_one(rec, tgt, path: Path, mirror: Path | None, say: Say, outcome: LockOutcome) -> None:
    from envbuild.lock import check_lock_file

    name = f"{rec.name}/{tgt.name}"
    notices: list[str] = []
    entry: dict[str, Any] = {"recipe": rec.name, "target": tgt.name, "path": str(path), "notices": notices}

    def notice(m: str) -> None:
        notices.append(m)
        say(LockNote(name, m))

    try:
        held = check_lock_file(path, rec, tgt, git_mirror=mirror, progress=notice)
        entry.update(ok=True, problems=[])
        say(LockNote(name, "up to date" + (" (git pins re-verified in the mirror)" if mirror else "")))
        entry["unhashed"] = _unhashed(held, path, rec, tgt, say)
    except CheckFailed as exc:
        entry.update(ok=False, problems=exc.message.split("\n  - ")[1:] or [exc.message])
        outcome.failures.append(exc)
        say(LockNote(name, kind="stale"))
    outcome.results.append(entry)


def _lock_one(request: LockRequest, rec, tgt, path: Path, mirror: Path | None, moving: Upgrade, say: Say,
              outcome: LockOutcome) -> None:
    from envbuild.lock import write_lock

    name = f"{rec.name}/{tgt.name}"
    started = time.monotonic()
    entry: dict[str, Any] = {"recipe": rec.name, "target": tgt.name, "path": str(path)}
    say(LockNote(name, "locking"))
    try:
        lock, changed, moves = write_lock(rec, tgt, path, git_mirror=mirror, wheelhouse=request.wheelhouse,
                                          progress=lambda m: say(LockNote(name, m)),
                                          upgrade=moving)
    except EnvbuildError as exc:
        if not request.every:
            raise
        outcome.failures.append(exc)
        entry.update(ok=False, problems=[str(exc)])
        outcome.results.append(entry)
        say(LockNote(name, str(exc), "failed"))
        return
    unverified = [p.name for p in lock.packages if not p.verified] + [g.name for g in lock.git if not g.verified]
    entry.update(ok=True, changed=changed, packages=len(lock.packages), git=len(lock.git),
                 unverified=unverified, seconds=round(time.monotonic() - started, 1),
                 moved=[m.as_dict() for m in moves], unhashed=_unhashed(lock, path, rec, tgt, say))
    outcome.results.append(entry)
    for m in moves:
        say(LockNote(name, m.line(), "data"))
    say(LockNote(name, f"{'wrote' if changed else 'unchanged'} {path} "
                       f"({len(lock.packages)} packages, {len(lock.git)} git, {len(unverified)} unverified)"))


def lock(request: LockRequest, *, say: Say | None = None) -> LockOutcome:
    """Export, check or lock (see the module docstring). InputError for a bad request, recipe or
    target; a single pair's lock error is raised as it happens."""
    from envbuild.lock import default_lockdir, git_mirror_dir, locate_lock, lock_path, writable_lock

    tell = say or _quiet
    pairs = _pairs(request)
    if request.form != "url" and request.fmt != "requirements":
        raise InputError("--export-form chooses how a requirements export names its files",
                         hint="use it with --format requirements")
    if (request.upgrade or request.upgrade_packages) and (request.check or request.fmt != "envbuild"):
        raise InputError("--upgrade and --upgrade-package re-lock; --check and --format do not",
                         hint="drop --check/--format, or drop the upgrade options")
    moving = Upgrade.of(request.upgrade, request.upgrade_packages)
    if request.fmt != "envbuild":
        return _export(request, pairs, tell)
    if request.output and len(pairs) > 1:
        raise InputError("-o/--output names one file but --all writes many", hint="use --lockdir")
    mirror = git_mirror_dir(request.git_mirror)  # --check with a mirror re-verifies every git pin there

    def where(rec, tgt) -> Path:
        if request.check:  # the lock provision would take
            return request.output or locate_lock(rec.name, tgt.name, request.lockdir)
        return writable_lock(request.output or lock_path(rec.name, tgt.name, default_lockdir(request.lockdir)))

    paths = [where(rec, tgt) for rec, tgt in pairs]  # a refused path: before anything is resolved
    outcome = LockOutcome(check=request.check, every=request.every)
    for (rec, tgt), path in zip(pairs, paths):
        if request.check:
            _check_one(rec, tgt, path, mirror, tell, outcome)
        else:
            _lock_one(request, rec, tgt, path, mirror, moving, tell, outcome)
    return outcome
