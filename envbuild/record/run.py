"""run.json (``RunInfo``) and recipe.json as the report reads it (``RecipeView``).

Every field the flows write is declared here: provision (``envbuild.provision``: lock, fleet,
bundle, the no-op, the finish with its verdict, an interrupt or an error and its phase) and
``launch --submit`` (``envbuild.launch.submit``: the job, the provision run it verified).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from envbuild.connect.selection import NodeSelection
from envbuild.recipes.schema import Benchmark as RecipeBenchmark
from envbuild.record.base import Record
from envbuild.record.verdict import RunWord

RUN_SCHEMA = "envbuild.run/2"
# /1: written by envbuild before the typed record (a dict merged by RunDir.update_run); read
# through migrate.run_info

Status = Literal["running", "ok", "failed", "partial", "dry-run", "interrupted", "error"]
UNFINISHED = ("running", "dry-run", "interrupted", "error")  # statuses runs/latest never points at


class BundleRecord(Record):
    """The offline bundle a run was provisioned from (``envbuild.bundle.unpack.OpenedBundle.summary``)."""

    file: str
    digest: str  # sha256 of the bundle file
    offline: bool = True
    recipe: str | None = None
    target: str | None = None
    lock_digest: str | None = None
    files: int | None = None
    bytes: int | None = None
    omitted: list["Omitted"] = Field(default_factory=list)
    prebuilt: list[str] = Field(default_factory=list)  # build-cache keys whose wheel the bundle carries
    prebuilt_seeded: list[str] = Field(default_factory=list)  # of those, the keys the controller's cache lacked
    # of those, the keys whose cache folder held another wheel (other bytes): that one was pushed, not the carried
    prebuilt_not_used: list[str] = Field(default_factory=list)


class Omitted(Record):
    name: str
    why: str


class FleetTree(Record):
    """``provision --fanout``: the tree the fleet's archive went down (``envbuild.provision.stagetree``);
    each node's result says where its copy came from (``fleet_from``)."""

    fanout: int
    sha256: str  # the archive's
    holders: dict[str, str | None] = Field(default_factory=dict)  # node -> the node it takes the copy from (None: the controller)


class FleetRecord(Record):
    """Whether the wheels were fetched once and pushed to the nodes (``envbuild.bundle.fleet``)."""

    pushed: bool
    nodes: int
    why: str | None = None  # not pushed: why
    digest: str | None = None
    dir: str | None = None
    files: int | None = None
    bytes: int | None = None
    downloaded_bytes: int | None = None
    cache_bytes: int | None = None
    wheelhouse_bytes: int | None = None
    staged_bytes: int | None = None
    origins: dict[str, str] = Field(default_factory=dict)  # wheel file -> download | cache | wheelhouse | staged
    tree: FleetTree | None = None


class JobRef(Record):
    """The scheduler job a ``launch --submit`` run followed."""

    id: str
    state: str
    exit_code: str


class VerdictReason(Record):
    """Why a finished run's verdict is FAIL (``envbuild.report.model.Reason``, or the report's own failure)."""

    kind: str
    host: str | None = None
    message: str


class RunInfo(Record):
    """run.json: what was run, where, with which lock, and how it ended."""

    schema_: str = Field(RUN_SCHEMA, alias="schema")
    run_id: str
    recipe: str
    target: str
    envbuild_version: str | None = None  # older runs: None
    argv: list[str] = Field(default_factory=list)
    started: str | None = None
    finished: str | None = None
    status: Status
    lock_path: str | None = None
    lock_digest: str | None = None  # envbuild.lock.lock_digest; older runs: None (read from lock.lock)
    hosts: list[str] = Field(default_factory=list)
    # the flow's options as given (provision: its ProvisionOptions less argv, target, recipe;
    # launch: {"launch": LaunchOptions set}); read back through given_hosts / given_inventory
    options: dict[str, Any] = Field(default_factory=dict)
    fleet: FleetRecord | None = None
    bundle: BundleRecord | None = None
    ansible: str | None = None  # why Ansible did not start (a no-op run)
    verdict: RunWord | None = None  # the report's, when the run finished
    verdict_reasons: list[VerdictReason] = Field(default_factory=list)
    verdict_not_judged: list[str] = Field(default_factory=list)
    exit_code: int | None = None  # provision's exit code (the README's exit codes)
    phase: str | None = None  # where a run stopped before Ansible recorded its own end
    # seconds each phase of the provision took, in order (bundle, facts, preflight, lock, plan,
    # render, prefix-lock, probe, ansible, shared-prefix, finish: those it reached): where a run's
    # wall time went (a no-op's too)
    phase_s: dict[str, float] = Field(default_factory=dict)
    error: str | None = None  # the error that stopped it
    signal: str | None = None  # the signal that interrupted it
    interrupted_at: dict[str, str | None] = Field(default_factory=dict)  # node -> step it was in
    job: JobRef | None = None  # launch --submit
    provisioned_run: str | None = None  # launch --submit: the verified provision run copied in
    # how the nodes were reached (verify, launch --submit): the one node selection, as recorded
    # (NodeSelection.record()); a run that recorded none is mapped once where it is read
    # (RunRecord.selection, envbuild.record.migrate.selection)
    selection: NodeSelection | None = None

    @field_validator("lock_path", "provisioned_run", mode="before")
    @classmethod
    def _path_text(cls, v: Any) -> Any:
        return str(v) if isinstance(v, Path) else v

    @property
    def finished_run(self) -> bool:
        """A run that ended (not running, a dry run, interrupted or stopped by an error)."""
        return self.status not in UNFINISHED

    @property
    def given_hosts(self) -> str | None:
        """``--hosts`` as the flow was given it (None: not given)."""
        value = self.options.get("hosts")
        return str(value) if value else None

    @property
    def smoke_skipped(self) -> bool:
        """``provision --no-smoke``: the run was told not to run the smoke."""
        return self.options.get("smoke") is False

    @property
    def given_inventory(self) -> str | None:
        """``--inventory`` as the flow was given it (None: not given)."""
        value = self.options.get("inventory")
        return str(value) if value else None


class SourceView(Record):
    model_config = ConfigDict(defer_build=True, extra="ignore")

    url: str | None = None


class DeviationView(Record):
    """A deviation of the recipe (``envbuild.recipes.schema.Deviation``) as the report shows it."""

    model_config = ConfigDict(defer_build=True, extra="ignore")

    id: str
    published: str
    problem: str
    instead: str
    source: SourceView | None = None
    status: str | None = None
    handled_by: list[str] = Field(default_factory=list)
    test: list[str] = Field(default_factory=list)

    @property
    def state(self) -> str:
        """handled, open or unverified (``envbuild.recipes.schema.deviation_state``)."""
        from envbuild.recipes.schema import deviation_state

        return deviation_state(self.model_dump())


class PublishedView(Record):
    model_config = ConfigDict(defer_build=True, extra="ignore")

    url: str | None = None


class RecipeView(Record):
    """recipe.json (the recipe as run, ``envbuild.recipes.schema.Recipe``'s own document) as far
    as the report reads it; the rest of the recipe is not read here. ``benchmark`` is the
    recipe's own model (``envbuild.recipes.schema.Benchmark``), validated where recipe.json is
    read (its parser is not looked up: a record may name a reader gone since)."""

    model_config = ConfigDict(defer_build=True, extra="ignore")

    name: str | None = None
    title: str = ""
    python: str | None = None
    published: PublishedView | None = None
    benchmark: RecipeBenchmark | None = None
    deviations: list[DeviationView] = Field(default_factory=list)


BundleRecord.model_rebuild()
