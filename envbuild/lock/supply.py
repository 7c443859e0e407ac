"""How to supply a locked package whose file the lock could not reach (its index was down where
the lock was made): the one download on a machine that reaches the index, then the re-lock that
records the file's sha256. Pure: text from a lock entry."""

from __future__ import annotations

import shlex

from envbuild.lock.schema import LockedPackage


def download_command(entry: LockedPackage, python: str, arch: str) -> str:
    """``pip download`` of exactly the locked file, for the target's Python and platform."""
    where = ((f"--find-links {shlex.quote(entry.source)}" if entry.source.endswith(".html")
              else f"--index-url {shlex.quote(entry.source)}") if "://" in entry.source else "")
    return " ".join(f"python -m pip download --no-deps --only-binary=:all: --python-version {python} "
                    f"--platform linux_{arch} {where} -d WHEELS "
                    f"{shlex.quote(f'{entry.name}=={entry.version}')}".split())


def supply_steps(entry: LockedPackage, recipe: str, target: str, python: str, arch: str) -> str:
    """'on a machine that reaches <index>, <download>; then envbuild lock ... --wheelhouse WHEELS'."""
    return (f"on a machine that reaches {entry.source}, {download_command(entry, python, arch)}; then "
            f"envbuild lock {recipe} --target {target} --wheelhouse WHEELS (its sha256 is recorded)")
