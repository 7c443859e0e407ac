"""Whether a benchmark run finished, read from the setup's own output (pure).

A throughput figure says nothing when the run behind it stopped early, diverged or crashed:
``completion(parser, text, ...)`` reads, from what the setup itself prints, whether the run
reached its planned end, and returns one of

* ``complete``: the planned end was reached (the printed end-of-training line, or the last
  logged iteration/update equal to the planned count) and nothing below was seen;
* ``stopped``: it ended before its plan (last iteration below ``train_iters``, the scheduler
  cancelled or timed the job out, the launcher's exit status was not 0, no end line);
* ``diverged``: a non-finite loss, a non-zero count of NaN iterations, or skipped iterations
  on more than half of the iterations run (a loss-scale flood);
* ``error``: an error was printed (a Python traceback, CUDA out of memory, an NCCL error,
  slurmstepd's or srun's error lines, a smoke record with ``ok: false``).

Every rule is a row of ``RULES`` with the source line of the code that prints what it reads.
``envbuild.smoke.judge`` turns a completion and a metric into a verdict.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from envbuild.smoke.native import (METASEQ_RE, iteration_lines, megatron_arguments, parse_alpa_benchmark,
                                   parse_envbuild_smoke, strip_task_labels)

# the printing code each rule reads, at the commits the recipes pin
MEGATRON_END = ("megatron/training.py pretrain(): print_datetime('after training is done') "
                "(NVIDIA/Megatron-LM b31e129, microsoft/Megatron-DeepSpeed 87476ce, "
                "argonne-lcf/Megatron-DeepSpeed e4bac70, MegatronApp's vendored core_v0.4.0)")
MEGATRON_ITER = ("megatron/training.py training_log(): ' iteration {:8d}/{:8d} |' ... "
                 "'number of skipped iterations: {:3d} |' 'number of nan iterations: {:3d} |'")
METASEQ_END = ("metaseq/cli/train.py main(): logger.info('done training in {:.1f} seconds') "
               "(facebookresearch/metaseq 5ca6005)")
METASEQ_INNER = "metaseq/cli/train.py train(): progress.log(stats, tag='train_inner', step=num_updates)"
ALPA_RESULT = ("benchmark/util.py write_tsv(), called last by osdi22_artifact/megatron/"
               "benchmark_gpt_one_case.py (alpa-projects/alpa e0ae8bf)")
SMOKE = "envbuild/smoke/gpt.py and collective.py: the envbuild.smoke/1 record's ok, error and loss"

ERROR_LINES = [
    (re.compile(r"^Traceback \(most recent call last\):", re.M), "a Python traceback"),
    (re.compile(r"CUDA out of memory|OutOfMemoryError", re.I), "CUDA out of memory"),
    (re.compile(r"NCCL error|ncclInternalError|ncclSystemError|ncclUnhandledCudaError"), "an NCCL error"),
    (re.compile(r"^(?:\d+: )?(?:srun|slurmstepd): error: (?!.*CANCELLED)(?!.*TIME LIMIT).*", re.M), "a Slurm error"),
    (re.compile(r"^Segmentation fault|\bcore dumped\b", re.M), "a crash"),
]
CANCELLED = re.compile(r"slurmstepd: error: \*\*\* (?:JOB|STEP) [\d.]+ ON \S+ CANCELLED AT (\S+)"
                       r"(?: DUE TO (TIME LIMIT|PREEMPTION|NODE FAILURE))?")
MEGATRON_END_RE = re.compile(r"\[after training is done\] datetime:")
MEGATRON_EXIT_RE = re.compile(r"\[exiting program (?:at iteration (\d+)|after [\d.]+ minutes)\]")
METASEQ_END_RE = re.compile(r"\| done training in [\d.]+ seconds")
TERMINAL_OK = {"COMPLETED"}


@dataclass(frozen=True)
class Completion:
    """How a run ended, as its own output shows it."""

    state: str  # complete | stopped | diverged | error
    detail: str
    planned: int | None = None  # iterations / updates the run was set to do
    reached: int | None = None  # the last one it logged
    sources: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.state == "complete"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _errors(text: str) -> list[str]:
    return [what for rx, what in ERROR_LINES if rx.search(text)]


def _scheduler(text: str, job_state: str | None, rc: int | None) -> str | None:
    """Why the scheduler or the launcher says the run did not finish (None: they do not)."""
    if m := CANCELLED.search(text):
        return f"the job was cancelled at {m.group(1)}" + (f" ({m.group(2).lower()})" if m.group(2) else "")
    if job_state and job_state.split()[0].upper() not in TERMINAL_OK:
        return f"the scheduler's job state is {job_state}"
    if rc not in (None, 0):
        return f"the launcher exited with status {rc}"
    return None


def _megatron(text: str, planned_hint: int | None) -> Completion:
    rows = iteration_lines(text)
    args = megatron_arguments(text)
    planned = next((r["train_iters"] for r in reversed(rows)), None)
    if planned is None and (value := args.get("train_iters", "")).isdigit():
        planned = int(value)
    planned = planned or planned_hint
    reached = rows[-1]["iteration"] if rows else None
    sources = [MEGATRON_ITER, MEGATRON_END]
    losses = [r["lm loss"] for r in rows if "lm loss" in r]
    nan_rows = [r["iteration"] for r in rows if r.get("number of nan iterations", 0) > 0]
    if any(not math.isfinite(v) for v in losses) or re.search(r"lm loss: (?:nan|inf)", text, re.I):
        return Completion("diverged", "a logged lm loss is not finite", planned, reached, sources)
    if nan_rows:
        return Completion("diverged", f"Megatron counted NaN iterations (first at iteration {nan_rows[0]})",
                          planned, reached, sources)
    skipped = sum(int(r.get("number of skipped iterations", 0)) for r in rows)
    if reached and skipped * 2 > reached:
        return Completion("diverged", f"{skipped} of {reached} iterations skipped (loss-scale overflow)",
                          planned, reached, sources)
    if m := MEGATRON_EXIT_RE.search(text):
        return Completion("stopped", f"Megatron exited early ({m.group(0).strip('[]')})", planned, reached, sources)
    if reached is None:
        return Completion("stopped", "no iteration line was logged", planned, None, sources)
    if planned is not None and reached < planned:
        return Completion("stopped", f"the last logged iteration is {reached} of {planned}", planned, reached, sources)
    if planned is None and not MEGATRON_END_RE.search(text):
        return Completion("stopped", "neither train_iters nor the end-of-training line was printed",
                          None, reached, sources)
    return Completion("complete", f"iteration {reached} of {planned} logged" if planned else
                      "the end-of-training line was printed", planned, reached, sources)


def _metaseq(text: str, planned_hint: int | None) -> Completion:
    updates, losses = [], []
    for line in text.splitlines():
        m = METASEQ_RE.search(line)
        if not m or m.group(1) != "train_inner":
            continue
        try:
            record = json.loads(m.group(2))
        except ValueError:
            continue
        if str(record.get("num_updates", "")).isdigit():
            updates.append(int(record["num_updates"]))
        if "loss" in record:
            try:
                losses.append(float(record["loss"]))
            except (TypeError, ValueError):
                losses.append(math.nan)
    reached = updates[-1] if updates else None
    sources = [METASEQ_INNER, METASEQ_END]
    if any(not math.isfinite(v) for v in losses):
        return Completion("diverged", "a logged loss is not finite", planned_hint, reached, sources)
    if reached is None:
        return Completion("stopped", "no train_inner line was logged", planned_hint, None, sources)
    if planned_hint is not None and reached < planned_hint:
        return Completion("stopped", f"the last logged update is {reached} of {planned_hint}",
                          planned_hint, reached, sources)
    if not METASEQ_END_RE.search(text):
        return Completion("stopped", f"update {reached} logged, but metaseq did not print 'done training'",
                          planned_hint, reached, sources)
    return Completion("complete", f"'done training' printed after update {reached}", planned_hint, reached, sources)


def _alpa(text: str, planned_hint: int | None) -> Completion:
    got = parse_alpa_benchmark(text)
    if not got.get("results"):
        return Completion("stopped", "no result line (write_tsv) was printed", None, None, [ALPA_RESULT])
    value = got.get("tflops_per_gpu")
    if value is not None and not math.isfinite(value):
        return Completion("diverged", "the result's tflops is not finite", None, None, [ALPA_RESULT])
    return Completion("complete", "the result line was printed", None, None, [ALPA_RESULT])


def _smoke(text: str, planned_hint: int | None) -> Completion:
    got = parse_envbuild_smoke(text)
    if not got:
        return Completion("stopped", "no envbuild.smoke/1 record was printed", None, None, [SMOKE])
    if got.get("ok") is False or got.get("error"):
        return Completion("error", f"the smoke record says ok: false ({got.get('error') or got.get('status') or 'no reason'})",
                          None, None, [SMOKE])
    last = got.get("loss_last")
    if isinstance(last, (int, float)) and not math.isfinite(last) or last == "nan":
        return Completion("diverged", "the smoke's last loss is not finite", None, None, [SMOKE])
    return Completion("complete", "the smoke record says ok", None, None, [SMOKE])


# parser name -> the rule reading its completion (a row per printed format)
RULES = {
    "megatron-pretrain": _megatron,
    "megatron-deepspeed": _megatron,
    "megatronapp": _megatron,
    "opt-baselines": _metaseq,
    "alpa-benchmark": _alpa,
    "envbuild-smoke": _smoke,
}


def completion(parser: str, text: str, *, planned: int | None = None, rc: int | None = None,
               job_state: str | None = None) -> Completion:
    """How the run whose output is ``text`` ended (``parser``: the recipe's benchmark parser;
    ``planned``: the iterations/updates the recipe's command asks for, where the output does
    not print them; ``rc``: the launcher's exit status where it passes the program's on;
    ``job_state``: the scheduler's final state of the job)."""
    text = strip_task_labels(text)
    rule = RULES.get(parser)
    if rule is None:
        return Completion("stopped", f"no completion rule for parser {parser!r}")
    got = rule(text, planned)
    if got.state in ("diverged",):
        return got
    errors = _errors(text)
    if errors:
        return Completion("error", "the output shows " + ", ".join(errors), got.planned, got.reached,
                          got.sources)
    if why := _scheduler(text, job_state, rc):
        return Completion("stopped", why, got.planned, got.reached, got.sources)
    return got
