"""``RunRecord.load(path)``: a run folder read into its models (the one reader).

run.json is read at once (it says what the folder is); every other file when first asked for,
so that a command that needs a node's plan does not fail on another node's smoke.json. An
absent file is None (a refused node has no observed state); a damaged one, or one that does
not fit its model, is an ``InputError`` naming the file and the fields.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from envbuild.compat.check import Verdict as PreflightVerdict
from envbuild.connect.selection import NodeSelection
from envbuild.errors import InputError
from envbuild.facts.model import NodeFacts
from envbuild.observe.model import Observed
from envbuild.plan.model import Plan
from envbuild.record import migrate
from envbuild.record.launch import LaunchRecord
from envbuild.record.node import NodeResult
from envbuild.record.run import RecipeView, RunInfo
from envbuild.record.smoke import SmokeRecord
from envbuild.userfile import read_json

DAMAGED = "the run directory is damaged; rerun `envbuild provision`"
M = TypeVar("M", bound=BaseModel)


def validated(model: type[M], data: Any, source: str | Path, what: str) -> M:
    """``model`` of ``data``, or an InputError naming ``source`` and the fields that do not fit."""
    if not isinstance(data, dict):
        raise InputError(f"{source}: not {what}: a JSON {type(data).__name__}, expected an object", hint=DAMAGED)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc']) or '<top>'}: {e['msg']}" for e in exc.errors()]
        raise InputError(f"{source}: not {what}: {'; '.join(problems[:4])}"
                         + (f" (and {len(problems) - 4} more)" if len(problems) > 4 else ""),
                         hint=DAMAGED) from None


def _json(path: Path) -> Any:
    """A JSON file of the run folder, None when absent."""
    if not path.exists():
        return None
    return read_json(path, "run directory JSON file", hint=DAMAGED)


def read_run_info(run_dir: Path) -> RunInfo:
    """run.json of ``run_dir`` (older schemas mapped); InputError when there is none or it is damaged."""
    path = Path(run_dir) / "run.json"
    data = _json(path)
    if data is None:
        raise InputError(f"{run_dir} is not a run directory (no run.json)",
                         hint="pass a folder under $ENVBUILD_HOME/runs/, made by `envbuild provision`")
    if isinstance(data, dict):
        data = migrate.run_info(data, str(path))
    return validated(RunInfo, data, path, "a run record")


@dataclass
class NodeRecord:
    """One node's folder, ``nodes/<host>/``; each file read when first asked for."""

    path: Path
    run: RunInfo = field(repr=False)

    @property
    def host(self) -> str:
        return self.path.name

    def _load(self, name: str, model: type[M], what: str, mapping=None) -> M | None:
        data = _json(self.path / name)
        if data is None:
            return None
        if mapping is not None and isinstance(data, dict):
            data = mapping(data)
        return validated(model, data, self.path / name, what)

    @functools.cached_property
    def result(self) -> NodeResult | None:
        return self._load("result.json", NodeResult, "a node result")

    @functools.cached_property
    def facts(self) -> NodeFacts | None:
        return self._load("facts.json", NodeFacts, "a facts record")

    @functools.cached_property
    def preflight(self) -> PreflightVerdict | None:
        return self._load("preflight.json", PreflightVerdict, "a preflight verdict",
                          lambda d: migrate.preflight(d, self.host, self.run))

    @functools.cached_property
    def plan(self) -> Plan | None:
        return self._load("plan.json", Plan, "a node plan")

    @functools.cached_property
    def observed(self) -> Observed | None:
        return self._load("observed.json", Observed, "an observed state")

    @functools.cached_property
    def smoke(self) -> SmokeRecord | None:
        return self._load("smoke.json", SmokeRecord, "a smoke record", migrate.smoke)

    @functools.cached_property
    def log_lines(self) -> list[str]:
        """The node's log (``log.txt``: what its steps printed), one line each; [] without one.
        Undecodable bytes are replaced: a log is evidence to read, never a record to refuse."""
        log = self.path / "log.txt"
        return log.read_text(errors="replace").splitlines() if log.is_file() else []


@dataclass
class RunRecord:
    """A run folder: run.json, and the rest when asked for."""

    path: Path
    run: RunInfo

    @classmethod
    def load(cls, path: str | Path) -> RunRecord:
        path = Path(path)
        return cls(path, read_run_info(path))

    @functools.cached_property
    def recipe(self) -> RecipeView | None:
        data = _json(self.path / "recipe.json")
        return None if data is None else validated(RecipeView, data, self.path / "recipe.json", "a recipe")

    @functools.cached_property
    def launch(self) -> LaunchRecord | None:
        data = _json(self.path / "launch.json")
        if isinstance(data, dict):
            data = migrate.launch(data)
        return None if data is None else validated(LaunchRecord, data, self.path / "launch.json", "a launch record")

    @property
    def selection(self) -> NodeSelection | None:
        """How the run reaches its nodes: run.json's ``selection``, validated where it was read;
        for a run that recorded none, its options or hosts (``migrate.selection``); None when
        it names no node."""
        return migrate.selection(self.run)

    @property
    def lock_file(self) -> Path:
        return self.path / "lock.lock"

    @functools.cached_property
    def lock(self) -> dict | None:
        """lock.lock as data (``envbuild.observe.read_lock``; the lock's own schema), None without one."""
        from envbuild.observe.expected import read_lock

        return read_lock(self.lock_file) if self.lock_file.exists() else None

    @functools.cached_property
    def lock_digest(self) -> str | None:
        """run.json's lock digest; for a run whose run.json predates recording it, the digest of
        its lock.lock (None when there is none, or it is not a lock envbuild reads)."""
        if self.run.lock_digest or not self.lock_file.exists():
            return self.run.lock_digest
        from envbuild.lock.serialize import lock_digest, parse_lock

        try:
            return lock_digest(parse_lock(self.lock_file.read_text(), self.lock_file))
        except (InputError, OSError, ValueError):
            return None

    def node_names(self) -> list[str]:
        root = self.path / "nodes"
        return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []

    @functools.cached_property
    def _nodes(self) -> dict[str, NodeRecord]:
        return {name: NodeRecord(self.path / "nodes" / name, self.run) for name in self.node_names()}

    def nodes(self) -> list[NodeRecord]:
        """Every node folder, by name."""
        return list(self._nodes.values())

    def node(self, name: str) -> NodeRecord | None:
        return self._nodes.get(name)
