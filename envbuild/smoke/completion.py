"""Whether a benchmark run finished, read from the setup's own output (pure).

A throughput figure says nothing when the run behind it stopped early, diverged or crashed:
``completion(parser, text, ...)`` reads, from what the setup itself prints, whether the run
reached its planned end. A file may hold several runs (a requeued Slurm job, a retry after a
crash, a 4-GPU then an 8-GPU run): it is split at each launcher start
(``envbuild.smoke.native.split_runs``: Megatron's arguments block, metaseq's config line,
Alpa's command echo, after each envbuild.smoke record), the LAST run is judged, and
``Completion.runs`` says how many there were (the detail says "run N of N"). The state is one of

* ``complete``: the planned end was reached (the printed end-of-training line, or the last
  logged iteration/update equal to the planned count) and nothing below was seen;
* ``stopped``: it ended before its plan (last iteration below ``train_iters``, the scheduler
  cancelled or timed the job out, the launcher's exit status was not 0, no end line);
* ``diverged``:
  - Megatron (every tree): a NaN iteration counted (``number of nan iterations``); a loss or
    grad norm printed non-finite; the ``lm loss`` field missing from a line on which an
    iteration advanced (it is printed only ``if avg > 0.0``, so a NaN average vanishes, and
    under DeepSpeed ``skipped_iter`` is always 0: this is Megatron's only trace of it); skips at
    the minimum loss scale; no iteration advanced in a run that reached its end. Overflow skips
    while the loss scale falls from its start (fp16: 2**32 with hysteresis 2 unless
    ``--initial-loss-scale``) are the scaler settling, NOT divergence: MegatronApp's published
    20-iteration run skips 17 of them and completes;
  - DeepSpeed: ``steps: N loss: nan`` (pipeline engine), two ``[deepspeed] OVERFLOW!`` lines in
    a row that keep the scale (its minimum; one alone is the hysteresis step), "Current loss
    scale already at minimum", and in a run that reached its end ``skipped=`` equal to
    ``step=`` or rising by every step of the last reporting intervals after steps had been
    applied, over more steps than one healthy overflow skips (one overflow at the last step with
    ``steps_per_print: 1`` is the scaler's hysteresis, not divergence);
  - metaseq: a ``"loss": "NaN"``; two overflow notes in a row that set the same scale (the
    minimum: ``dynamic_loss_scaler`` keeps it);
  - Alpa: a non-finite ``tflops``; envbuild's smoke: a non-finite last loss;
* ``error``: an error was printed in the judged run (a Python traceback, CUDA out of memory,
  an NCCL error, slurmstepd's or srun's error lines, a smoke record with ``ok: false``). A
  traceback a program prints on purpose after catching the exception (``logger.exception``
  right after its own message, then it goes on) is not one, but only the ones ``HANDLED``
  names: the message line printed just before, the exception it ends in, and the code.

Every rule is a row of ``RULES``; each ``Completion.sources`` names the repository, commit and
file:line of the code that prints what the rule read (``MEGATRON_*``, ``DEEPSPEED_SOURCES``,
``METASEQ_*``, ``ALPA_RESULT``, ``SMOKE``). ``envbuild.smoke.judge`` turns a completion and a
metric into a verdict. The corpus that checks every rule: tests/data/native_logs/cases.yaml.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable

from envbuild.recipes.linear import linear
from envbuild.smoke import logread
from envbuild.smoke.native import (METASEQ_RE, iteration_lines, last_run, megatron_arguments, parse_alpa_benchmark,
                                   parse_envbuild_smoke)

# the printing code each rule reads, at the commits the recipes pin
MEGATRON_END = ("megatron/training.py pretrain(): print_datetime('after training is done') "
                "(NVIDIA/Megatron-LM b31e129, microsoft/Megatron-DeepSpeed 87476ce, "
                "argonne-lcf/Megatron-DeepSpeed e4bac70, MegatronApp's vendored core_v0.4.0)")
MEGATRON_ITER = ("megatron/training.py training_log(): ' iteration {:8d}/{:8d} |' ... "
                 "'number of skipped iterations: {:3d} |' 'number of nan iterations: {:3d} |'")
MEGATRON_LOSS = ("megatron/training.py training_log(): the loss average is printed only 'if avg > 0.0' "
                 "(microsoft/Megatron-DeepSpeed 87476ced :644, argonne-lcf/Megatron-DeepSpeed e4bac701 :1078, "
                 "OpenSQZ/MegatronApp 1bed2a72 Megatron/megatron/training.py:675); under DeepSpeed train_step() "
                 "sets skipped_iter = 0 (87476ced :398,471; e4bac701 :666,749)")
MEGATRON_SCALE = ("Megatron's dynamic loss scale: --initial-loss-scale 2**32, --min-loss-scale 1.0, --hysteresis 2 "
                  "(OpenSQZ/MegatronApp 1bed2a72 Megatron/megatron/arguments.py:1052-1059; "
                  "Megatron/megatron/optimizer/grad_scaler.py:86-106 DynamicGradScaler.update)")
DEEPSPEED_SOURCES = [
    "DeepSpeed pipe/engine.py train_batch(): print(f'steps: {global_steps} loss: {agg_train_loss:0.4f} ...') "
    "(microsoft/DeepSpeed v0.6.3 dda0336 :363, v0.10.3 04a6fed :365; deepspeedai/DeepSpeed v0.18.9 8c93851 :400-405)",
    "DeepSpeed '[deepspeed] OVERFLOW! Rank R Skipping step. Attempted loss scale: X, reducing to Y' "
    "(v0.6.3 runtime/zero/stage_1_and_2.py:1651; v0.10.3 runtime/fp16/loss_scaler.py:172-190, :176 "
    "'Current loss scale already at minimum'; v0.18.9 loss_scaler.py:271-280)",
    "DeepSpeed engine.py _report_progress(): log_dist(f'step={step}, skipped={skipped_steps}, ...') every "
    "steps_per_print steps, skipped_steps += 1 on an overflow (v0.6.3 :1823,1835,2056; v0.10.3 :2060,2073,2283; "
    "v0.18.9 :2744,2759,3005); v0.18.9's logger is at WARNING (utils/logging.py:61), so neither this nor "
    "OVERFLOW is printed there: the missing lm loss is the only trace",
]
DS_STEPS_NAN_RE = linear(r"(?mi)^steps: (\d+) loss: (?:nan|-?inf)\b")
DS_OVERFLOW_RE = linear(r"\[deepspeed\] OVERFLOW! Rank \d+ Skipping step\. Attempted loss scale: "
                        r"([\d.]+), reducing to ([\d.]+)")
DS_AT_MIN_RE = linear(r"Current loss scale already at minimum - cannot decrease scale anymore")
DS_PROGRESS_RE = linear(r"\[Rank 0\] step=(\d+), skipped=(\d+),")
METASEQ_OVERFLOW = ("metaseq/trainer.py:784-788 logger.info(f'NOTE: gradient overflow detected, ignoring "
                    "gradient, {e}') with metaseq/optim/dynamic_loss_scaler.py:55-75 ('setting loss scale to: X'; "
                    "below --min-loss-scale the scale is kept, so X repeats)")
METASEQ_OVERFLOW_RE = linear(r"NOTE: gradient overflow detected, ignoring gradient, setting loss scale to: (\S+)")
METASEQ_END = ("metaseq/cli/train.py main(): logger.info('done training in {:.1f} seconds') "
               "(facebookresearch/metaseq 5ca6005)")
METASEQ_INNER = "metaseq/cli/train.py train(): progress.log(stats, tag='train_inner', step=num_updates)"
ALPA_RESULT = ("benchmark/util.py write_tsv(), called last by osdi22_artifact/megatron/"
               "benchmark_gpt_one_case.py (alpa-projects/alpa e0ae8bf)")
SMOKE = "envbuild/smoke/gpt.py and collective.py: the envbuild.smoke/1 record's ok, error and loss"


def _any(m: Any) -> bool:
    return True


def _not_cancelled(m: Any) -> bool:
    """slurmstepd's cancellation line is the scheduler's word (``CANCELLED``), not an error of the run."""
    return "CANCELLED" not in m.group(1) and "TIME LIMIT" not in m.group(1)


# (the pattern, what it is, which of its matches count): a line any match of which counts
ERROR_LINES: list[tuple[Any, str, Callable[[Any], bool]]] = [
    (linear(r"(?m)^Traceback \(most recent call last\):"), "a Python traceback", _any),
    (linear(r"(?i)CUDA out of memory|OutOfMemoryError"), "CUDA out of memory", _any),
    (linear(r"NCCL error|ncclInternalError|ncclSystemError|ncclUnhandledCudaError"), "an NCCL error", _any),
    (linear(r"(?m)^(?:\d+: )?(?:srun|slurmstepd): error: (.*)"), "a Slurm error", _not_cancelled),
    (linear(r"(?m)^Segmentation fault|\bcore dumped\b"), "a crash", _any),
]
# tracebacks a program catches and logs on purpose, then goes on (each row: the message printed on
# the line just before "Traceback", the exception line the traceback must end in, the code)
HANDLED = [
    (linear(r"Failed to register S3PathHandler\. Try pip install boto3$"),
     linear(r"^ModuleNotFoundError: No module named 'boto3'$"),
     "facebookresearch/metaseq 4de251ff metaseq/file_io/__init__.py:23-30: the optional S3 path handler's "
     "import in try/except Exception, logger.exception(...) and on (boto3 is only in setup.py's 'test' extra)"),
]
TRACEBACK = "Traceback (most recent call last):"
CANCELLED = linear(r"slurmstepd: error: \*\*\* (?:JOB|STEP) [\d.]+ ON \S+ CANCELLED AT (\S+)"
                   r"(?: DUE TO (TIME LIMIT|PREEMPTION|NODE FAILURE))?")
MEGATRON_END_RE = linear(r"\[after training is done\] datetime:")
MEGATRON_EXIT_RE = linear(r"\[exiting program (?:at iteration (\d+)|after [\d.]+ minutes)\]")
METASEQ_END_RE = linear(r"\| done training in [\d.]+ seconds")
TERMINAL_OK = {"COMPLETED"}


@dataclass(frozen=True)
class Completion:
    """How a run ended, as its own output shows it."""

    state: str  # complete | stopped | diverged | error
    detail: str
    planned: int | None = None  # iterations / updates the run was set to do
    reached: int | None = None  # the last one it logged
    sources: list[str] = field(default_factory=list)
    runs: int = 1  # runs in the file (split at each launcher start); the last one is judged

    @property
    def complete(self) -> bool:
        return self.state == "complete"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _errors(text: str) -> list[str]:
    text = without_handled_tracebacks(text)
    return [what for rx, what, counts in ERROR_LINES if any(counts(m) for m in rx.finditer(text))]


def without_handled_tracebacks(text: str) -> str:
    """``text`` less each traceback that a ``HANDLED`` row names: its message on the line just
    before "Traceback", its frames, and its last line the row's exception. Anything else (another
    message, another exception, a chained one, lines of other ranks in between) stays."""
    if TRACEBACK not in text:  # no traceback at all: the text as it is, never copied
        return text
    lines = text.split("\n")
    keep: list[str] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == TRACEBACK and keep and (end := _handled_end(lines, i, keep[-1])) is not None:
            i = end + 1
            continue
        keep.append(lines[i])
        i += 1
    return "\n".join(keep)


def _handled_end(lines: list[str], start: int, before: str) -> int | None:
    """The index of the exception line closing the traceback at ``start`` when a HANDLED row
    names both its message (``before``) and that exception; None otherwise."""
    rows = [exc for msg, exc, _ in HANDLED if msg.search(before.rstrip())]
    if not rows:
        return None
    end = start + 1
    while end < len(lines) and lines[end].startswith(" "):
        end += 1
    if end < len(lines) and any(exc.match(lines[end].rstrip()) for exc in rows):
        return end
    return None


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
    sources = [MEGATRON_ITER, MEGATRON_LOSS, MEGATRON_SCALE, MEGATRON_END]

    def out(state: str, detail: str, *more: str) -> Completion:
        return Completion(state, detail, planned, reached, sources + list(more))

    if why := _megatron_diverged(rows, args):
        return out("diverged", why)
    if why := _deepspeed_diverged(text, finished=reached is not None and planned is not None and reached >= planned):
        return out("diverged", why, *DEEPSPEED_SOURCES)
    if m := MEGATRON_EXIT_RE.search(text):
        return out("stopped", f"Megatron exited early ({m.group(0).strip('[]')})")
    if reached is None:
        return out("stopped", "no iteration line was logged")
    if planned is not None and reached < planned:
        return out("stopped", f"the last logged iteration is {reached} of {planned}")
    if planned is None and not MEGATRON_END_RE.search(text):
        return out("stopped", "neither train_iters nor the end-of-training line was printed")
    skipped = sum(int(r.get("number of skipped iterations", 0)) for r in rows)
    settled = f"; {skipped} iterations skipped while the loss scale settled" if skipped else ""
    return out("complete", (f"iteration {reached} of {planned} logged" if planned else
                            "the end-of-training line was printed") + settled)


def _megatron_diverged(rows: list[dict[str, Any]], args: dict[str, str]) -> str | None:
    """Why Megatron's own iteration lines show a diverged run (None: they do not).

    Overflow skips while the loss scale falls are the dynamic loss scaler settling (fp16 starts
    at --initial-loss-scale, 2**32 by default, with hysteresis 2), not divergence. Divergence
    is: a NaN iteration counted; a loss or grad norm printed non-finite; a loss missing from a
    line on which some iteration advanced (``if avg > 0.0``: a NaN average is not printed; under
    DeepSpeed ``skipped_iter`` is always 0, so this is the only trace Megatron leaves); skips at
    the minimum loss scale; or no iteration advanced in the whole run."""
    min_scale = _num(args.get("min_loss_scale")) or 1.0
    interval = int(_num(args.get("log_interval")) or 0) or None
    previous = None
    advanced = 0
    for row in rows:
        it = row["iteration"]
        n = it - previous if previous is not None and it > previous else min(it, interval or it)
        previous = it
        skipped = int(row.get("number of skipped iterations", 0))
        if row.get("number of nan iterations", 0) > 0:
            return f"Megatron counted NaN iterations (first at iteration {it})"
        for key in ("lm loss", "grad norm"):
            if key in row and not math.isfinite(row[key]):
                return f"the logged {key} is not finite (iteration {it})"
        stepped = n - skipped
        if "lm loss" not in row and "number of skipped iterations" in row and stepped > 0:
            return (f"the lm loss is missing from the line of iteration {it} although {stepped} "
                    "iteration(s) advanced: Megatron prints the average only when it is > 0 (NaN is not)")
        advanced += max(stepped, 0)
        scale = row.get("loss scale")
        if skipped and scale is not None and scale <= min_scale:
            return f"iterations skipped at the minimum loss scale {scale:g} (iteration {it})"
    if rows and not advanced and rows[-1]["iteration"] >= rows[-1]["train_iters"]:
        return f"no iteration advanced: all {rows[-1]['iteration']} were skipped (loss-scale overflow)"
    return None


def _deepspeed_diverged(text: str, finished: bool = True) -> str | None:
    """Why DeepSpeed's own lines show a diverged run (None: they do not): ``steps: N loss: nan``
    (the pipeline engine), ``[deepspeed] OVERFLOW!`` at the minimum loss scale (two in a row that
    keep the scale), its loss scaler's "already at minimum", or every step skipped (``skipped=``
    equal to ``step=``, or rising by the whole last interval after steps had been applied) in a
    run that reached its planned end (one killed while its scale settles is stopped, not diverged);
    the last intervals' skips must span more steps than a healthy overflow skips
    (``HYSTERESIS_SKIPS``)."""
    if DS_AT_MIN_RE.search(text):
        return "DeepSpeed's loss scale reached its minimum and could not fall further"
    if m := DS_STEPS_NAN_RE.search(text):
        return f"DeepSpeed logged a non-finite loss at step {m.group(1)}"
    # one overflow that keeps the scale is the hysteresis step (v0.6.3 prints it as "reducing to"
    # the same scale); two in a row that keep it are the minimum: the scale can fall no more
    scales = [(float(a), float(b)) for a, b in DS_OVERFLOW_RE.findall(text)]
    for (a0, b0), (a1, b1) in zip(scales, scales[1:]):
        if a0 == b0 == a1 == b1:
            return f"DeepSpeed skipped steps at its minimum loss scale {b1:g}"
    progress = [(int(a), int(b)) for a, b in DS_PROGRESS_RE.findall(text)] if finished else []
    if progress and progress[-1][0] > 0 and progress[-1][1] >= progress[-1][0]:
        return f"DeepSpeed skipped every step ({progress[-1][1]} of {progress[-1][0]})"
    if (stretch := _skipped_to_the_end(progress)) is not None:
        return (f"DeepSpeed skipped every step from {stretch[0]} to {progress[-1][0]} after steps had "
                "been applied (gradient overflow to the end)")
    return None


# the steps one healthy fp16 overflow skips: one, whether it spends the hysteresis (the scale kept)
# or halves the scale (DeepSpeed v0.10.3 runtime/fp16/loss_scaler.py:180-190; v0.6.3
# runtime/zero/stage_1_and_2.py:1651); a diverged run skips on, step after step
HYSTERESIS_SKIPS = 1


def _skipped_to_the_end(progress: list[tuple[int, int]]) -> tuple[int, int] | None:
    """(the step, skipped) of the progress line from which every step to the last was skipped,
    after steps had been applied before it, when that stretch is longer than a healthy overflow's
    ``HYSTERESIS_SKIPS``; None otherwise. With ``steps_per_print: 1`` one overflow at the last step
    is an interval of one step that was skipped: the scaler's hysteresis, not divergence."""
    start = None
    for (s0, k0), (s1, k1) in zip(reversed(progress[:-1]), reversed(progress[1:])):
        if not (s1 > s0 and k1 - k0 >= s1 - s0):
            break
        start = (s0, k0)
    if start is None or start[0] <= start[1]:  # nothing applied before the stretch: every step skipped
        return None
    return start if progress[-1][0] - start[0] > HYSTERESIS_SKIPS else None


def _num(text: str | None) -> float | None:
    try:
        return float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _metaseq(text: str, planned_hint: int | None) -> Completion:
    updates, losses = [], []
    for line in logread.lines(text):
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
    scales = METASEQ_OVERFLOW_RE.findall(text)
    if any(a == b for a, b in zip(scales, scales[1:])):
        return Completion("diverged", "gradient overflow at the minimum loss scale (the scale no longer falls)",
                          planned_hint, reached, sources + [METASEQ_OVERFLOW])
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
    last = got.get("loss_last")
    if isinstance(last, (int, float)) and not math.isfinite(last) or last == "nan":
        return Completion("diverged", "the smoke's last loss is not finite", None, None, [SMOKE])
    if got.get("ok") is False or got.get("error"):
        return Completion("error", f"the smoke record says ok: false ({got.get('error') or got.get('status') or 'no reason'})",
                          None, None, [SMOKE])
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
    rule = RULES.get(parser)
    if rule is None:
        return Completion("stopped", f"no completion rule for parser {parser!r}")
    text, runs = last_run(parser, text)
    got = replace(rule(text, planned), runs=runs)
    if got.state != "diverged":
        if errors := _errors(text):
            got = replace(got, state="error", detail="the output shows " + ", ".join(errors))
        elif why := _scheduler(text, job_state, rc):
            got = replace(got, state="stopped", detail=why)
    if runs > 1:
        got = replace(got, detail=f"{got.detail} (run {runs} of {runs} in the file; the earlier ones are not judged)")
    return got
