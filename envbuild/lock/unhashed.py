"""What a lock could not hash, why, and the maintainer's commands that fill it. Pure: read from the
lock's model and the command its header names.

A file is *not hashed* when the lock records no sha256 for the build the recipe names:

- ``missing``: no file at all (``dist`` empty; not preinstalled, not provided by the node): its
  index was unreachable where the lock was made (download.pytorch.org for the CUDA builds of
  alpa-megatron and opt-175b-azure). Render, bundle and provision refuse it unless it is
  supplied (``--wheelhouse``) or accepted by name (``--allow-unverified``).
- ``stand-in``: PyPI's build of the same version was hashed in its place (``replaces``: a CPU
  target, where that build runs): the lock is complete, but not with the recipe's own file.

The fill is the same for both: download exactly that file on a machine that reaches its index,
then lock again with the folder as ``--wheelhouse``; the lock then records its sha256
(tests/bundle/test_bundle_hints.py follows it). ``header_lines`` puts this into the lock's header
(``envbuild.lock.serialize.dump_lock``: the missing ones; a stand-in is said by its entry's
``replaces``), ``page`` into docs/unhashed.md (both).

    >>> fill_command("envbuild lock alpa-megatron --target h100 --git-mirror DIR")
    'envbuild lock alpa-megatron --target h100 --git-mirror DIR --wheelhouse WHEELS'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from envbuild.lock.schema import Lock, LockedPackage
from envbuild.lock.supply import download_command

WHEELS = "WHEELS"  # the folder the download writes and the re-lock reads (a placeholder: per machine)


@dataclass(frozen=True)
class Unhashed:
    """One file the lock could not hash (see the module docstring)."""

    name: str
    version: str  # the recipe's build, e.g. 1.8.2+cu111
    index: str  # where that file is published
    kind: str  # missing | stand-in
    why: str
    file: str  # which file, in words: the wheel for the lock's Python and platform
    download: str  # the command that fetches exactly that file into WHEELS


def arch_of(lock: Lock) -> str:
    """The target's machine (``x86_64`` of ``x86_64-manylinux_2_17``)."""
    return lock.platform.python_platform.split("-", 1)[0]


def _row(entry: LockedPackage, version: str, index: str, kind: str, why: str, lock: Lock) -> Unhashed:
    wanted = entry.model_copy(update={"version": version, "source": index})
    py = "cp" + lock.python.replace(".", "")
    return Unhashed(name=entry.name, version=version, index=index, kind=kind, why=why,
                    file=f"the {py} wheel of {entry.name} {version} for linux_{arch_of(lock)} on {index}",
                    download=download_command(wanted, lock.python, arch_of(lock)))


def unhashed(lock: Lock) -> list[Unhashed]:
    """Every file of ``lock`` not hashed, in lock order."""
    out = []
    for entry in [*lock.packages, *lock.tooling]:
        if entry.dist is None and entry.source != "preinstalled" and not entry.provided_by:
            why = (entry.reason or "no file recorded").removeprefix("not verified: ")
            out.append(_row(entry, entry.version, entry.source, "missing", why, lock))
        elif entry.replaces:  # "1.10.1+cpu from https://... (index ... unreachable from here)"
            version, _, rest = entry.replaces.partition(" from ")
            index, _, why = rest.partition(" (")
            out.append(_row(entry, version, index, "stand-in", why.rstrip(")") +
                            f"; PyPI's {entry.version} is hashed in its place", lock))
    return out


def fill_command(command: str) -> str:
    """The lock's regenerate ``command`` with the wheelhouse the download filled."""
    if "--wheelhouse" in command:
        return command.replace("--wheelhouse DIR", f"--wheelhouse {WHEELS}")
    return f"{command} --wheelhouse {WHEELS}"


def header_lines(lock: Lock, command: str) -> list[str]:
    """The lock header's account of the files it has none for (no lines when it has every
    file; a stand-in is said by its entry's ``replaces``, and listed in docs/unhashed.md)."""
    rows = [r for r in unhashed(lock) if r.kind == "missing"]
    if not rows:
        return []
    out = [f"# NOT HASHED here: {len(rows)} file(s) this lock has no file and no sha256 for:"]
    for r in rows:
        out += [f"#   {r.name} {r.version}: {r.file}", f"#     why: {r.why}",
                f"#     fetch it where that index answers: {r.download}"]
    out.append(f"#   then fill the lock with its sha256: {fill_command(command)}")
    return out


def notes(lock: Lock, command: str) -> list[str]:
    """One line per file not hashed, for ``envbuild lock`` to print: what, why, the fill."""
    return [f"{r.name} {r.version} not hashed ({'no file' if r.kind == 'missing' else 'stand-in'}: {r.why}): "
            f"{r.download}; then {fill_command(command)}" for r in unhashed(lock)]


def header_command(text: str) -> str | None:
    """The regenerate command a lock file's header names (its second line), if any."""
    lines = text.splitlines()
    if len(lines) > 1 and lines[0].startswith("# DO NOT EDIT") and lines[1].startswith("#   "):
        return lines[1][4:].strip()
    return None


def page(locks: Iterable[tuple[str, str, Lock, str]]) -> str:
    """docs/unhashed.md from ``(recipe, target, lock, header command)`` of every published lock."""
    rows = list(locks)
    out = ["# Files the published locks could not hash", "",
           "Generated from the shipped locks (`lockfiles/`) by `envbuild.lock.unhashed.page`;",
           "tests/lock/test_lock_unhashed.py fails when it differs from them (regenerate with",
           "`ENVBUILD_UPDATE_GOLDEN=1 python -m pytest tests/lock/test_lock_unhashed.py`). Each lock says the",
           "same: its header lists the files it has none for, with these commands, and a stand-in's entry",
           "names the build it stands in for (`replaces`). A file is not hashed when the lock holds no",
           "sha256 for the build the recipe names:",
           "no file at all (render, bundle and provision refuse it unless supplied or accepted with",
           "`--allow-unverified NAME`), or PyPI's build of that version hashed in its place on a CPU",
           "target. The fill is one download on a machine that reaches the index, then the lock again",
           f"with that folder as `--wheelhouse` ({WHEELS} below; DIR: your git mirror folder).", ""]
    complete = [f"{r}/{t}" for r, t, lock, _ in rows if not unhashed(lock)]
    for recipe, target, lock, command in rows:
        found = unhashed(lock)
        if not found:
            continue
        out += [f"## {recipe} on {target}", "",
                f"`lockfiles/{recipe}/{target}.lock`:", ""]
        for r in found:
            what = "no file" if r.kind == "missing" else "a stand-in hashed instead"
            out += [f"- **{r.name} {r.version}** ({what}): {r.file}.", f"  Why: {r.why}.",
                    f"  Fetch: `{r.download}`"]
        out += ["", f"Fill: `{fill_command(command)}`", ""]
    out += ["## Every file hashed", "", ", ".join(f"`{c}`" for c in complete) or "(none)", ""]
    commits = [(r, t, g) for r, t, lock, _ in rows for g in lock.git if not g.verified]
    if commits:  # not files, but the same question: what the maintainer's mirror must hold
        out += ["## Commits not verified", "",
                "Pinned commits the lock could not find in a mirror (`verified: false`); the lock's own "
                "command (`envbuild lock RECIPE --target T --git-mirror DIR`) records them verified where "
                "DIR holds them.", ""]
        out += [f"- `{r}/{t}`: {g.name} {g.url} @ {(g.sha or g.ref)[:12]}: "
                f"{(g.reason or '').removeprefix('not verified: ')}" for r, t, g in commits]
        out.append("")
    return "\n".join(out)
