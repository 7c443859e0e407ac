"""launch.json (``LaunchRecord``): the scheduler job of a run made by ``envbuild launch --submit``
(``envbuild.launch.submit``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from envbuild.observe.model import Drift
from envbuild.record.base import Number, Record
from envbuild.record.verdict import RunWord

LAUNCH_SCHEMA = "envbuild.launch/1"


class JobOutcome(Record):
    """What the scheduler said about the finished job (``envbuild.launch.submit.JobResult.to_dict``)."""

    scheduler: str
    job_id: str
    state: str  # COMPLETED, FAILED, CANCELLED, TIMEOUT, ... (local: COMPLETED / FAILED)
    exit_code: str  # Slurm "rc:signal", local "rc"
    reason: str = ""
    first_node: str = ""
    stdout_path: str = ""
    stderr_path: str = ""
    timings: dict[str, Number] = Field(default_factory=dict)
    tail: str = ""
    nodes: list[str] = Field(default_factory=list)  # the job's nodes, as the scheduler names them


class NodeVerified(Record):
    """What ``envbuild verify`` said of a provisioned node before the job (``verify.NodeVerdict.to_dict``)."""

    node: str
    status: Literal["clean", "drift", "unreachable"]
    message: str = ""
    fingerprint: str | None = None
    insecure: bool = False
    drift: list[Drift] = Field(default_factory=list)


class PackedRef(Record):
    """The pack of the environment a job sent to its nodes (``envbuild pack``)."""

    sha256: str
    bytes: int
    prefix: str
    format: str = "tar.gz"  # tar.zst, tar.gz: unpacked on each node; squashfs: mounted there


class LaunchRecord(Record):
    schema_: str = Field(LAUNCH_SCHEMA, alias="schema")
    scheduler: str
    script: str | None = None
    job: JobOutcome
    replaced: str | None = None  # what replaced the training command (--smoke-only, --command-override)
    node: str | None = None  # the node the job's script ran on, by its own name
    nodes: list[str] = Field(default_factory=list)  # every node of the job
    node_dir: str | None = None  # the folder under nodes/ holding the job's results
    passed: bool | None = None  # True PASS, False FAIL, None NOT JUDGED
    status: RunWord | None = None  # the job's verdict (older pass | not-judged | fail: record.migrate.launch)
    provisioned_run: str | None = None
    # the pack the job unpacked on every node's own disk before the task (launch --packed)
    packed: PackedRef | None = None
    verified: list[NodeVerified] = Field(default_factory=list)
