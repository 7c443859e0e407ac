"""The run directory: ``$ENVBUILD_HOME/runs/<run-id>/``, shared by provision, smoke, report.

``<run-id>`` is ``YYYYmmdd-HHMMSS-<recipe>-<target>``; ``runs/latest`` points at the newest.
Layout: run.json, recipe.json, lock.lock, events.jsonl, ansible/ (runner's private folder),
nodes/<host>/{facts,preflight,plan,result,observed,smoke}.json and log.txt.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envbuild.fsio import write_atomic

RUN_SCHEMA = "envbuild.run/1"


def envbuild_home() -> Path:
    """``$ENVBUILD_HOME`` or ``~/.envbuild``."""
    return Path(os.environ.get("ENVBUILD_HOME") or Path.home() / ".envbuild")


def _json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n"


@dataclass
class RunDir:
    """One run's folder and its writers (all JSON atomic)."""

    path: Path

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
        p.mkdir(parents=True, exist_ok=True)
        return p

    def write(self, name: str, obj: Any) -> Path:
        return write_atomic(self.path / name, obj if isinstance(obj, str) else _json(obj))

    def write_node(self, host: str, name: str, obj: Any) -> Path:
        return write_atomic(self.node(host) / name, obj if isinstance(obj, str) else _json(obj))

    def read(self, name: str) -> Any:
        return json.loads((self.path / name).read_text())

    def update_run(self, **fields: Any) -> dict:
        data = self.read("run.json")
        data.update(fields)
        self.write("run.json", data)
        return data


def run_id(recipe: str, target: str, now: float | None = None) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.localtime(now)) + f"-{recipe}-{target}"


def create(recipe: str, target: str, *, argv: list[str], hosts: list[str], options: dict,
           home: Path | None = None) -> RunDir:
    """Make a new run folder (unique even within one second) and point runs/latest at it."""
    runs = (home or envbuild_home()) / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    base = run_id(recipe, target)
    path, n = runs / base, 1
    while True:
        try:
            path.mkdir()
            break
        except FileExistsError:
            n += 1
            path = runs / f"{base}.{n}"
    rd = RunDir(path)
    rd.write("run.json", {"schema": RUN_SCHEMA, "run_id": rd.run_id, "recipe": recipe,
                          "target": target, "argv": argv, "started": _now(), "finished": None,
                          "status": "running", "lock_path": None, "lock_digest": None,
                          "hosts": hosts, "options": options})
    link = runs / "latest"
    tmp = runs / f".latest.{os.getpid()}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(path.name)
    os.replace(tmp, link)
    return rd


def latest(home: Path | None = None) -> RunDir | None:
    link = (home or envbuild_home()) / "runs" / "latest"
    return RunDir(link.resolve()) if link.exists() else None


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
