"""nodes/<host>/smoke.json (``SmokeRecord``): one section per smoke script, and the recipe's
native benchmark.

Sections ``gpt``, ``collective`` and ``apex`` are the ``envbuild.smoke/1`` objects the smoke
scripts print (``envbuild.smoke.gpt``, ``collective``, ``apex_check``; ``read_result`` adds
``rc``, ``ok``, ``thresholds`` or an ``error``; ``--repeat`` adds ``repeat``). ``native`` is
the recipe's benchmark as ``envbuild.smoke.onnode.native_section`` or
``envbuild.launch.submit.results`` build it, judged: its ``verdict`` is the judge's ``Verdict`` (``envbuild.record.verdict``).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from envbuild.record.base import Number, Record
from envbuild.record.verdict import Verdict


class Repeat(Record):
    """A section measured several times (``envbuild smoke --repeat N``, ``smoke.combine_runs``)."""

    n: int
    values: dict[str, list[Number]] = Field(default_factory=dict)
    ok: list[bool] = Field(default_factory=list)


class Section(Record):
    """What every smoke section may carry."""

    schema_: str | None = Field(None, alias="schema")  # envbuild.smoke/1
    kind: str | None = None
    ok: bool | None = None
    rc: int | None = None
    error: str | None = None  # why the section is not ok (the script's, or the job's)
    thresholds: dict[str, Number] = Field(default_factory=dict)  # metric -> floor (smoke.floors)
    floors: dict[str, bool | None] | None = None  # what the judge said of each floor (smoke.judge)
    repeat: Repeat | None = None
    torch: str | None = None
    cuda: str | None = None
    device: str | None = None
    device_name: str | None = None


class Loss(Record):
    first: Number | None = None
    last: Number | None = None
    values: list[Number] = Field(default_factory=list)
    finite: bool | None = None
    decreased: bool | None = None


class GptSection(Section):
    """The GPT training-step smoke (``envbuild/smoke/gpt.py``)."""

    capability: str | None = None
    python: str | None = None
    dtype: str | None = None
    params_dtype: str | None = None
    compile: str | bool | None = None
    attention: str | None = None
    optimizer: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)  # the model shape and run settings
    threads: int | None = None
    params: int | None = None
    params_matmul: int | None = None
    flops_per_token: Number | None = None
    flops_formula: str | None = None
    tokens_per_step: int | None = None
    step_time_s: dict[str, Number] = Field(default_factory=dict)  # median, min, max
    step_times_s: list[Number] = Field(default_factory=list)
    warmup_s: Number | None = None
    tokens_per_s: Number | None = None
    tflops: Number | None = None
    peak_tflops: Number | None = None
    peak_matmul: dict[str, Any] = Field(default_factory=dict)  # the measured matmul peak: n, dtype, time, tflops
    mfu: Number | None = None
    max_memory_gib: Number | None = None
    loss: Loss | None = None
    warnings: list[str] = Field(default_factory=list)


class ImportCost(Record):
    """One rank's cost of importing torch from its environment (``collective.import_cost``):
    where the environment lies and what the import took (issue 38: a shared prefix against a
    node-local copy)."""

    rank: int
    host: str
    prefix: str
    fs_type: str | None = None
    shared: bool = False  # the prefix lies on a network or parallel file system
    seconds: Number
    files_opened: int | None = None  # Python's "open" audit events during the import
    dirs_listed: int | None = None  # os.listdir / os.scandir audit events
    modules_imported: int | None = None


class CollectiveSection(Section):
    """The all-reduce smoke (``envbuild/smoke/collective.py``), or a ``--smoke-only`` job's."""

    op: str | None = None
    backend: str | None = None
    world_size: int | None = None
    nccl_version: str | None = None
    busbw_formula: str | None = None
    results: list[dict[str, Any]] = Field(default_factory=list)  # one row per message size
    max_busbw_gbps: Number | None = None
    max_algbw_gbps: Number | None = None
    config: dict[str, Any] = Field(default_factory=dict)  # backend, world size, the sweep's sizes
    sweep: dict[str, Any] = Field(default_factory=dict)  # its cost: seconds, bytes per rank, load
    gpus_visible: int | None = None  # the GPUs its ranks could see (one rank each)
    gpus_node: int | None = None  # the node's count, from its facts (nvidia-smi), when the plan gave it
    cuda_visible_devices: str | None = None  # that variable's value for the smoke (None: unset)
    import_cost: list[ImportCost] = Field(default_factory=list)  # each rank's, in rank order
    job: "JobState | None" = None


class ApexSection(Section):
    """The Apex extension and numerics check (``envbuild/smoke/apex_check.py``)."""

    apex_path: str | None = None
    extensions: dict[str, str] = Field(default_factory=dict)  # extension -> "ok" or the import error
    checks: dict[str, dict[str, Any]] = Field(default_factory=dict)  # check -> {ok, errors, tolerance}
    status: str | None = None  # passed | failed | skipped
    reason: str | None = None


class JobState(Record):
    """The scheduler job a section came from (``launch --submit``)."""

    scheduler: str
    id: str
    state: str
    exit_code: str


class NativeSection(Section):
    """The recipe's own benchmark on this node: ran or not, its metrics and its verdict."""

    parser: str | None = None
    metric: str | None = None
    unit: str = ""
    threshold: Number | None = None
    higher_is_better: bool = True
    ran: bool | None = None
    reason: str | None = None  # why it did not run
    source: str | None = None  # gpt | native | job: whose output was parsed
    metrics: dict[str, Any] = Field(default_factory=dict)  # the parser's numbers (smoke.native.parse)
    verdict: Verdict | None = None  # the one judge's (envbuild.smoke.judge); older shapes: record.migrate
    replaced: str | None = None  # what replaced the training command
    job: JobState | None = None
    tail: str | None = None  # the job's output tail, when it did not complete


class SmokeRecord(Record):
    """smoke.json: each section that ran."""

    gpt: GptSection | None = None
    collective: CollectiveSection | None = None
    apex: ApexSection | None = None
    native: NativeSection | None = None

    def sections(self) -> dict[str, Section]:
        """{name: section} of the sections present."""
        return {k: v for k in ("apex", "collective", "gpt", "native") if (v := getattr(self, k)) is not None}


CollectiveSection.model_rebuild()
