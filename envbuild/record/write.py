"""``RunWriter``: the one writer of run.json (and of a node's result.json and smoke.json).

Every update is validated by ``RunInfo`` before anything is written: a field the record does
not declare, or a value of the wrong type, raises ``RecordError`` naming the file and the
field, and run.json stays as it was. Everything passes ``RunDir``'s redaction on the way out.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from envbuild import __version__, rundir
from envbuild.record.load import read_run_info
from envbuild.record.launch import LaunchRecord
from envbuild.record.node import NodeResult
from envbuild.record.run import RUN_SCHEMA, RunInfo
from envbuild.record.smoke import SmokeRecord


class RecordError(ValueError):
    """A flow tried to write something the run record does not hold (a bug in envbuild, not bad input)."""


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _check(model: type[BaseModel], data: dict, source: Path) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc']) or '<top>'}: {e['msg']}" for e in exc.errors()]
        raise RecordError(f"{source}: refused: {'; '.join(problems)} ({model.__name__}, "
                          f"envbuild/record/)") from None


class RunWriter:
    """Writes one run folder's records through their models."""

    def __init__(self, rd: rundir.RunDir):
        self.rd = rd

    @property
    def path(self) -> Path:
        return self.rd.path

    def _write(self, info: RunInfo) -> RunInfo:
        self.rd.write("run.json", info.model_dump(mode="json", by_alias=True))
        return info

    def start(self, recipe: str, target: str, *, argv: list[str], hosts: list[str], options: dict) -> RunInfo:
        """run.json of a run that starts now (status running)."""
        data = {"schema": RUN_SCHEMA, "run_id": self.rd.run_id, "recipe": recipe, "target": target,
                "envbuild_version": __version__, "argv": self.rd.redactor.argv(argv), "started": now(),
                "finished": None, "status": "running", "hosts": hosts, "options": options}
        return self._write(_check(RunInfo, data, self.path / "run.json"))

    def update(self, **fields: Any) -> RunInfo:
        """run.json with ``fields`` set (each a field of ``RunInfo``), validated, written whole."""
        source = self.path / "run.json"
        unknown = sorted(set(fields) - set(RunInfo.model_fields) - {"schema"})
        if unknown:
            raise RecordError(f"{source}: refused: {', '.join(unknown)}: not a field of the run record "
                              f"(RunInfo, envbuild/record/run.py)")
        current = read_run_info(self.path)
        data = {**current.model_dump(mode="json", by_alias=True), **fields}
        return self._write(_check(RunInfo, data, source))

    def finish(self, status: str, **fields: Any) -> RunInfo:
        """run.json of a run that ended now with ``status``."""
        return self.update(finished=now(), status=status, **fields)

    def node_result(self, host: str, result: NodeResult | dict) -> NodeResult:
        """nodes/<host>/result.json."""
        res = result if isinstance(result, NodeResult) else _check(NodeResult, result,
                                                                   self.rd.node(host) / "result.json")
        self.rd.write_node(host, "result.json", res.model_dump(mode="json", by_alias=True))
        return res

    def node_smoke(self, host: str, smoke: SmokeRecord | dict) -> SmokeRecord:
        """nodes/<host>/smoke.json (the sections as built, keys sorted)."""
        rec = smoke if isinstance(smoke, SmokeRecord) else _check(SmokeRecord, smoke,
                                                                  self.rd.node(host) / "smoke.json")
        import json

        self.rd.write_node(host, "smoke.json", json.dumps(rec.as_written(), indent=2, sort_keys=True) + "\n")
        return rec


    def launch(self, record: LaunchRecord | dict) -> LaunchRecord:
        """launch.json (a run of ``envbuild launch --submit``)."""
        rec = record if isinstance(record, LaunchRecord) else _check(LaunchRecord, record, self.path / "launch.json")
        self.rd.write("launch.json", rec.model_dump(mode="json", by_alias=True))
        return rec


def create_run(recipe: str, target: str, *, argv: list[str], hosts: list[str], options: dict,
               home: Path | None = None) -> RunWriter:
    """A new private run folder (``envbuild.rundir.create``) and its run.json."""
    writer = RunWriter(rundir.create(recipe, target, home=home))
    writer.start(recipe, target, argv=argv, hosts=hosts, options=options)
    return writer
