"""The run directory: ``$ENVBUILD_HOME/runs/<run-id>/``, shared by provision, smoke, report.

``<run-id>`` is ``YYYYmmdd-HHMMSS-<recipe>-<target>``; ``runs/latest`` points at the newest
*finished* run that was not a dry run (``RunDir.publish()``): a dry run, or a run aborted by an
interrupt or an error, never becomes ``latest``.
Layout: run.json, recipe.json, lock.lock, events.jsonl, ansible/ (runner's private folder),
nodes/<host>/{facts,preflight,plan,result,observed,smoke}.json and log.txt. This module only
makes the folder and writes files; what the JSON files hold, the one writer of run.json and
the one reader of the folder are ``envbuild.record`` (typed).

Run folders are private: ``runs/`` and each run are 0700 (created with that mode), files 0600.
Everything written through ``RunDir`` passes ``envbuild.redact`` first: the values of the
controller's secret-named environment variables and URL passwords are masked.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envbuild.fsio import write_atomic
from envbuild.redact import Redactor

PRIVATE_DIR, PRIVATE_FILE = 0o700, 0o600


def envbuild_home() -> Path:
    """``$ENVBUILD_HOME`` or ``~/.envbuild``."""
    return Path(os.environ.get("ENVBUILD_HOME") or Path.home() / ".envbuild")


def _json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n"


@dataclass
class RunDir:
    """One run's folder and its writers (all JSON atomic)."""

    path: Path
    redactor: Redactor = field(default_factory=Redactor, repr=False, compare=False)

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def events(self) -> Path:
        return self.path / "events.jsonl"

    @property
    def ansible(self) -> Path:
        return self.path / "ansible"

    def node(self, host: str) -> Path:
        p = self.path / "nodes" / host
        _private_dir(p.parent)
        _private_dir(p)
        return p

    def _text(self, obj: Any) -> str:
        return self.redactor.text(obj) if isinstance(obj, str) else _json(self.redactor.obj(obj))

    def write(self, name: str, obj: Any) -> Path:
        return write_atomic(self.path / name, self._text(obj), mode=PRIVATE_FILE)

    def write_node(self, host: str, name: str, obj: Any) -> Path:
        return write_atomic(self.node(host) / name, self._text(obj), mode=PRIVATE_FILE)

    def publish(self) -> None:
        """Point ``runs/latest`` at this run (a finished, non-dry run only)."""
        runs = self.path.parent
        link = runs / "latest"
        tmp = runs / f".latest.{os.getpid()}"
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        tmp.symlink_to(self.path.name)
        os.replace(tmp, link)


def run_id(recipe: str, target: str, now: float | None = None) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.localtime(now)) + f"-{recipe}-{target}"


def create(recipe: str, target: str, *, home: Path | None = None) -> RunDir:
    """Make a new private run folder (unique even within one second); ``latest`` is not moved
    until the run finishes (``RunDir.publish``). Its run.json is written by
    ``envbuild.record.create_run``, which calls this."""
    home = home or envbuild_home()
    if not home.exists():
        home.parent.mkdir(parents=True, exist_ok=True)
        _private_dir(home)
    runs = home / "runs"
    _private_dir(runs)
    base = run_id(recipe, target)
    path, n = runs / base, 1
    while True:
        try:
            path.mkdir(mode=PRIVATE_DIR)
            break
        except FileExistsError:
            n += 1
            path = runs / f"{base}.{n}"
    return RunDir(path)


def _private_dir(path: Path) -> None:
    """``path`` as a folder only its owner can enter (made 0700, or narrowed to it)."""
    try:
        path.mkdir(mode=PRIVATE_DIR)
    except FileExistsError:
        st = path.stat()
        if st.st_mode & 0o077 and st.st_uid == os.getuid():
            path.chmod(PRIVATE_DIR)


def latest(home: Path | None = None) -> RunDir | None:
    link = (home or envbuild_home()) / "runs" / "latest"
    return RunDir(link.resolve()) if link.exists() else None
