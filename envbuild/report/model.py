"""The verification report ("envbuild.report/1"): one run, judged, as data.

Built by ``envbuild.report.collect.collect(run_dir)``; rendered by render_md / render_html /
render_json. The JSON Schema of this model is shipped as ``report.schema.json`` beside it
(``write_schema()`` regenerates it; a golden copy lives in tests/golden/).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from envbuild.fsio import write_atomic
from envbuild.observe.model import Drift
from envbuild.shipped import REPORT_SCHEMA_FILE

REPORT_SCHEMA = "envbuild.report/1"
SCHEMA_FILE = REPORT_SCHEMA_FILE


class _M(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid")


class Reason(_M):
    """Why the verdict is FAIL (one line a reviewer reads)."""

    kind: Literal["run", "preflight", "step", "drift", "benchmark", "smoke", "unobserved"]
    host: str | None = None
    message: str


VerdictStatus = Literal["PASS", "NOT JUDGED", "FAIL"]


class Verdict(_M):
    """PASS: every node provisioned and was observed as locked, the smoke passed, and the
    recipe's benchmark completed on every node and met its threshold. FAIL: something shown
    failed (``reasons``). NOT JUDGED: nothing failed, but no threshold decided the run
    (``not_judged`` says what was not measured or not compared)."""

    status: VerdictStatus
    reasons: list[Reason] = Field(default_factory=list)
    not_judged: list[str] = Field(default_factory=list)

    def summary(self) -> str:
        """One line for a terminal: the status and its first reason or note."""
        first = self.reasons[0].message if self.reasons else self.not_judged[0] if self.not_judged else ""
        more = len(self.reasons or self.not_judged) - 1
        return f"verdict: {self.status}" + (f": {first}" if first else "") + (f" (+{more} more)" if more > 0 else "")


class BundleInfo(_M):
    """The offline bundle a run was provisioned from (``provision --bundle``)."""

    digest: str  # sha256 of the bundle file
    file: str
    bytes: int | None = None
    offline: bool = True
    prebuilt: list[str] = Field(default_factory=list)  # build-cache keys of the carried extension wheels installed
    prebuilt_not_used: list[str] = Field(default_factory=list)  # "KEY (why)": carried, not installed


class ProvisionedRun(_M):
    """The earlier run that provisioned the environment a no-op run found done (the newest
    earlier run in the same runs folder with the same environment fingerprint on every node and
    something installed): its timings are the provision's, the no-op's are not."""

    run_id: str
    started: str | None = None
    finished: str | None = None
    argv: list[str] = Field(default_factory=list)
    smoke_skipped: bool = False  # that run was made with --no-smoke


class RunInfo(_M):
    run_id: str
    recipe: str
    target: str
    status: str
    started: str | None = None
    finished: str | None = None
    argv: list[str] = Field(default_factory=list)
    hosts: list[str] = Field(default_factory=list)
    bundle: BundleInfo | None = None  # offline: provisioned from this bundle, no network
    envbuild_version: str | None = None  # the envbuild that made the run (run.json; older runs: None)
    # a no-op: every step of every node was done and held, nothing ran (run.json's ``ansible``)
    nothing_to_do: str | None = None
    provisioned_by: ProvisionedRun | None = None  # a no-op's: the run that provisioned, where found
    smoke_skipped: bool = False  # provision --no-smoke: no smoke and no benchmark were run


class RecipeInfo(_M):
    name: str
    title: str = ""
    published: str | None = None  # URL of the instructions reproduced
    python: str | None = None
    lock_digest: str | None = None


class Deviation(_M):
    """Where envbuild departs from the published instructions, and why (from the recipe).
    ``status``: ``handled`` (the recipe names the code and the test), ``open`` (not handled
    yet) or ``unverified`` (a claim that names no code)."""

    id: str
    published: str
    problem: str
    instead: str
    source: str | None = None
    status: Literal["handled", "open", "unverified"] = "unverified"
    handled_by: list[str] = Field(default_factory=list)

    def status_text(self) -> str:
        return {"handled": "handled (" + ", ".join(self.handled_by) + ")",
                "open": "OPEN: not handled yet"}.get(self.status, "unverified: names no code")


class FactsSummary(_M):
    gpu: str | None = None  # "NVIDIA H100 80GB HBM3"
    gpu_count: int = 0
    compute_capability: str | None = None
    driver: str | None = None
    driver_cuda: str | None = None
    nvcc: str | None = None
    nccl: str | None = None
    os: str | None = None
    glibc: str | None = None
    cpu: str | None = None
    memory_gib: float | None = None
    origin: str | None = None


class Preflight(_M):
    verdict: str  # "feasible" / "infeasible" / "refused" ...
    ok: bool
    problems: list[str] = Field(default_factory=list)


class StepResult(_M):
    status: str  # ok | failed | refused | unreachable
    failed_step: str | None = None
    command: str | None = None
    rc: int | None = None
    changed: list[str] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)
    duration_s: float | None = None
    log_tail: str | None = None


class PinRow(_M):
    """One pin: what the lock/plan expects and what the node had."""

    kind: Literal["package", "git", "extension", "env"]
    name: str
    expected: str | None = None
    observed: str | None = None
    ok: bool


class PatchRow(_M):
    id: str
    component: str | None = None
    decision: str | None = None
    status: str  # applied / already-applied / reverted / recorded / missing
    reason: str = ""
    diff: str = ""


class DecisionRow(_M):
    subject: str
    outcome: str
    reason: str
    source: str | None = None


class Spread(_M):
    """Repeated measurements of one number (``envbuild smoke --repeat N``)."""

    n: int
    median: float
    min: float
    max: float


class Comparison(_M):
    """What the judge compared a native figure with (``envbuild.record.verdict.Compared``): the
    recipe's ``threshold`` (``source``: its citation) or a same-GPU ``reference`` of one or more
    runs (``runs``, their ``spread``: range over median, and the ``tolerance`` taken from it)."""

    kind: Literal["threshold", "reference"]
    value: float
    required: float
    gpu: str | None = None  # None: any hardware
    gpus: int | None = None
    source: str | None = None
    normalisation: str | None = None  # how GPU counts were divided out, where they differ
    runs: list[str] = Field(default_factory=list)
    statistic: str | None = None
    spread: float | None = None
    tolerance: float | None = None


class Benchmark(_M):
    """One measured number, with its threshold and the published figure when there are any."""

    name: str  # "gpt.tokens_per_s", "native.elapsed_time_per_iteration_ms"
    value: float | None = None  # the median when the measurement was repeated
    unit: str = ""
    threshold: float | None = None
    higher_is_better: bool = True
    passed: bool | None = None  # None: no threshold
    published: float | None = None  # the published figure (the recipe's benchmark.published)
    published_source: str | None = None  # where that figure is published
    # why the published figure is not compared (measured on another GPU model, or unknown):
    # ``published`` is then None (envbuild.smoke.hardware)
    published_not_compared: str | None = None
    spread: Spread | None = None  # repeated runs, or the measured window: median, min, max
    # the judge's stored verdict (envbuild.smoke.judge): its word and reason, what the figure was
    # compared with (a threshold on its GPU, or a same-GPU reference record) and the judged record
    verdict: Literal["PASS", "NOT JUDGED", "FAIL", "NOTHING FOUND"] | None = None
    reason: str = ""
    compared_with: str | None = None  # "threshold >= 200000 on 8 x NVIDIA A100-SXM4-80GB", "reference ..."
    reference: str | None = None  # the reference record (docs/results/...), when compared with one
    reference_value: float | None = None
    record: str | None = None  # the judged run's output
    compared: Comparison | None = None  # the judge's yardstick, as it stored it
    gpu: str | None = None  # the run's GPU model and count, as the judge took them
    gpus: int | None = None
    published_gpu: str | None = None  # the GPU model and count the published figure was measured on
    published_gpus: int | None = None
    published_percent: float | None = None  # the run's figure as a share of it (same model only)


class LaunchJob(_M):
    """The scheduler job of a run made by ``envbuild launch --submit`` (its launch.json)."""

    scheduler: str
    job_id: str | None = None
    state: str | None = None  # COMPLETED, FAILED, TIMEOUT, ...
    exit_code: str | None = None  # Slurm "rc:signal", local "rc"
    reason: str | None = None
    node: str | None = None
    passed: bool | None = None
    replaced: str | None = None  # what replaced the training command (--smoke-only, --command-override)
    provisioned_run: str | None = None
    output_tail: str = ""


class BadgeCriterion(_M):
    """One criterion of an artifact badge, judged on this run's evidence."""

    id: str
    requirement: str
    met: bool
    evidence: str


class Badge(_M):
    """An ACM artifact badge and whether this run's evidence supports it (a reviewer awards it)."""

    id: Literal["available", "functional", "reproduced"]
    name: str  # "Artifacts Available", "Artifacts Evaluated - Functional", "Results Reproduced"
    acm: str  # what ACM asks for, in short
    supported: bool
    criteria: list[BadgeCriterion] = Field(default_factory=list)
    # why the badge does not apply to this recipe ("" where it does): ACM's badges are about a
    # published artifact and its results; a setup of envbuild's own published neither
    not_applicable: str = ""


class PipelineStep(_M):
    """One computation of a pipeline rank (envbuild.smoke.pipeline_trace.Step)."""

    rank: int
    kind: Literal["forward", "backward"]
    slot: int
    microbatch: int
    chunk: int
    start_ms: float
    end_ms: float


class PipelineOrder(_M):
    """One iteration's computation order read from a MegatronApp trace (pipeline_trace.Order)."""

    iteration: int
    iterations: int
    ranks: int
    chunks: int
    microbatches: int
    duration_ms: float
    steps: list[PipelineStep] = Field(default_factory=list)
    source: str = ""  # the printing code the trace follows
    record: str = ""  # the trace it was read from (smoke/native.out)


class ImportCostRow(_M):
    """One rank's import of torch: where its environment lies (a prefix on a shared file
    system, or a node-local copy unpacked from a pack) and the seconds, files opened and
    folders listed it took."""

    rank: int
    host: str
    prefix: str
    fs_type: str | None = None
    shared: bool = False
    from_pack: bool = False  # the launch unpacked (or mounted) a pack of the environment at this prefix
    from_image: bool = False  # that pack was a squashfs image, mounted at the prefix
    seconds: float
    files_opened: int | None = None
    dirs_listed: int | None = None
    modules_imported: int | None = None


class NodeReport(_M):
    host: str
    facts: FactsSummary | None = None
    preflight: Preflight | None = None
    result: StepResult | None = None
    observed: bool = False
    python: str | None = None
    pins: list[PinRow] = Field(default_factory=list)
    patches: list[PatchRow] = Field(default_factory=list)
    decisions: list[DecisionRow] = Field(default_factory=list)
    drift: list[Drift] = Field(default_factory=list)
    benchmarks: list[Benchmark] = Field(default_factory=list)
    smoke_ok: dict[str, bool] = Field(default_factory=dict)  # gpt/collective/apex -> ok
    # the run whose smoke and benchmarks these are, when this run had nothing to do and they
    # carry forward from the newest earlier run of the same environment fingerprint
    evidence_from: str | None = None
    benchmark_not_run: str | None = None  # why the recipe's benchmark did not run here (smoke.json)
    fingerprint: str | None = None
    kind: str | None = None  # node kind: arch, glibc, CUDA, GPUs, torch, python (envbuild.bundle.fleet.node_kind)
    insecure: bool = False  # SSH host keys were not checked for this node (--insecure)
    unverified: list[str] = Field(default_factory=list)  # installed without a hash (--allow-unverified)
    pipeline: PipelineOrder | None = None  # the benchmark's pipeline computation order, where its trace has one
    # each rank's cost of importing torch from its environment (the collective smoke's; issue 38)
    import_cost: list[ImportCostRow] = Field(default_factory=list)


class Report(_M):
    """Everything a reviewer needs to accept or reject one run."""

    model_config = ConfigDict(defer_build=True, extra="forbid", populate_by_name=True)

    schema_: Literal["envbuild.report/1"] = Field(REPORT_SCHEMA, alias="schema")
    envbuild_version: str | None = None  # the envbuild that wrote this report
    verdict: Verdict
    fingerprint: str | None = None
    run: RunInfo
    recipe: RecipeInfo
    deviations: list[Deviation] = Field(default_factory=list)
    nodes: list[NodeReport] = Field(default_factory=list)
    launch: LaunchJob | None = None  # a run made by envbuild launch --submit
    badges: list[Badge] = Field(default_factory=list)  # ACM artifact badges (envbuild.report.badges)
    # a repeat of envbuild's own same-GPU reference: repeatability, stated apart, never a badge
    repeatability: list[str] = Field(default_factory=list)

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2) + "\n"


def json_schema() -> str:
    """The JSON Schema of the report, as stable text."""
    schema = Report.model_json_schema(by_alias=True)
    schema["title"] = "envbuild.report/1"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write_schema(path: Path = SCHEMA_FILE) -> Path:
    """Write the JSON Schema next to this module (or to ``path``)."""
    return write_atomic(path, json_schema())
