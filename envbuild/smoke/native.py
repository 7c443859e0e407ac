"""Parsers for the recipes' native benchmark logs, and the pass/fail rule.

Each parser is pure: ``parse(text, **options) -> dict`` of metrics, averaged over the logged
iterations after the first ``warmup`` log lines (default 1: the first interval holds start-up,
compilation and the first all-reduce). A recipe's ``benchmark.parser`` names one of
``NATIVE_PARSERS``; the one judge (``envbuild.smoke.judge``) decides the verdict.

``parse`` reads the LAST run of a file that holds several (``split_runs``: at each launcher
start the setup prints) and adds, beside the metric keys (unchanged):

* ``runs``: how many runs the file holds;
* ``window``: the measurement window, warm-up excluded: ``unit`` (``iteration``, ``update`` or
  ``result``), ``first`` and ``last`` (the iteration/update numbers of its first and last rows),
  ``used`` and ``logged`` rows;
* ``values``: per metric key (aliases too), its value on each row of the window, for a spread
  (the metric is their mean, except ``tflops_per_gpu`` computed from the mean iteration time).

Example::

    >>> m = parse_megatron_deepspeed(open("train.log").read())
    >>> m["samples_per_s"], m["window"]["used"], len(m["values"]["samples_per_s"])
    (97.75, 3, 3)

Formats (see tests/data/native_logs/ for excerpts and their sources):

* ``opt-baselines``: metaseq's JSON progress lines ``... | INFO | train_inner | {"wps": "774042",
  ...}``; values are strings. ``wps`` is words (tokens) per second over all GPUs.
* ``megatron-pretrain`` / ``megatronapp``: Megatron-LM ``training_log`` lines
  `` iteration   10/  100 | consumed samples: ... | elapsed time per iteration (ms): 812.3 |
  ... | global batch size:    16 | lm loss: ... |``. Samples/s = global batch / iteration time;
  TFLOP/s per GPU from the model shape (options, or the ``arguments`` block Megatron prints).
* ``megatron-deepspeed``: the same lines plus ``samples per second``, ``tokens per gpu per
  second (tgs)`` and ``TFLOPs`` as printed, and DeepSpeed's ``CurrSamplesPerSec=`` timer lines.
* ``alpa-benchmark``: Alpa's ``write_tsv`` result of benchmark_gpt_one_case.py, either the line
  rank 0 prints (``exp_name: e2e  ...  method: megatron  value: {'tflops': 47.53, ...}  time_stamp:
  ...``) or the line it appends to ``megatron_results_e2e.tsv``. No iteration lines exist there.
* ``megatronapp``: the trace file run_single.sh writes (``bash script/benchmark.sh train >
  trace_pipeline_P_model_chunks_C.txt``): the vendored Megatron's iteration lines plus the
  per-rank ``rank R iteration starts/ends at timestamp T%`` lines of its train loop.
* ``envbuild-smoke``: the JSON object printed by envbuild/smoke/gpt.py or collective.py.

Where one run starts (``split_runs``): Megatron's ``------------------------ arguments
------------------------`` (``_print_args``, rank 0, once per launch), moved back to the first
launch line before it (``MEGATRON_LAUNCH_RE``: Megatron's ``using world size:``, DeepSpeed's
launcher start, a ``set -x`` trace of ``srun`` starting one), so that a run killed before its
arguments block is still a run of its own; metaseq's config line (``metaseq.cli.train | {...
'common': {...``, train.py:85); Alpa's ``python3 -m torch.distributed.launch ...
benchmark_gpt_one_case.py`` echo (``torch.distributed.run`` or ``torchrun`` where a patch
changed the launcher; run_cmd; block-buffered without PYTHONUNBUFFERED, so it then ends its
run); an envbuild.smoke record ends its run.

A Slurm output file (``#SBATCH --output=%x-%j.out``) holds the job script's own lines (``set
-x`` traces, echoes) around the program's; ``srun -l`` labels every task line with ``N: ``.
Every parser reads such a file as it is: labels are removed from each run (``strip_task_labels``),
so a run under ``srun -l`` and one without it in the same file are both read.

Fixtures: ``tests/data/native_logs/<recipe>/`` were printed by the setups' own code at the
pinned commits (their README says which function printed each file); ``corpus/`` holds every
outcome of every shipped recipe in those formats (``cases.yaml`` names the printing code).
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from contextvars import ContextVar
from functools import wraps
from typing import Any, Callable, Iterator, TypeVar

from envbuild.recipes.linear import linear
from envbuild.smoke.logread import lines

# Every pattern is RE2's (envbuild.recipes.linear: linear in the line, no backtracking), and
# every line a log file gives is cut at MAX_LINE characters where it is read (logread). The two
# shapes read on nearly every line, a Megatron field and an srun -l label, are read by the
# functions field() and label_end(), in one pass each.
ITER_RE = linear(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|(.*)$")
NUMBER = r"[-+]?\d[\d.]*(?:[eE][-+]?\d+)?"
ARG_RE = linear(r"(?:^|\]:)\s*([a-z_][a-z0-9_]*) \.{2,} (\S.*?)\s*$")  # after a "[default0]:" prefix too
DS_TIMER_RE = linear(r"CurrSamplesPerSec=(" + NUMBER + ")")
METASEQ_RE = linear(r"\|\s*(train_inner|train)\s*\|\s*(\{.*\})\s*$")
TRACE_RE = linear(r"\brank (\d+) iteration (starts|ends) at timestamp (" + NUMBER + r")%")
ALPA_PRINTED_RE = linear(r"\bmethod: (\S+)\s+value: (\{.*?\})\s+time_stamp: (" + NUMBER + ")")
# NumPy >= 2 writes a scalar as np.float64(152.5) where 1.x wrote 152.5 (Alpa's value dict holds
# np.mean's result): the number inside is kept
NUMPY_SCALAR_RE = linear(r"\b(?:np|numpy)\.(?:float|int|uint)\d*\((" + NUMBER + r"|nan|inf)\)")

# Where one run of a setup starts (or ends) in a file that holds several (a requeued Slurm job, a
# retry after a crash, a 4-GPU then an 8-GPU run), from the code that prints the line:
# Megatron's _print_args("arguments", args) header, rank 0, once per launch (NVIDIA/Megatron-LM
# b31e129 megatron/arguments.py:_print_args; microsoft/Megatron-DeepSpeed 87476ced
# megatron/arguments.py:252; argonne-lcf/Megatron-DeepSpeed e4bac701 megatron/arguments.py:457;
# OpenSQZ/MegatronApp 1bed2a72 Megatron/megatron/arguments.py:406,417)
MEGATRON_START_RE = linear(r"(?m)^(?:[ \t]{0,8}\d{1,5}: )?-{24} arguments -{24}[ \t]*$")  # srun -l label or not
# The lines each launch prints before that header (a run killed before its arguments block has
# only these): Megatron's parse_args() "using world size: N, ..." just before _print_args (87476ce
# megatron/arguments.py, docs/results/h200x4-run8/mds-run2/native.out:117); DeepSpeed's runner
# "cmd = ..." and its launcher's "WORLD INFO DICT" (microsoft/DeepSpeed v0.6.3 dda0336
# launcher/runner.py:453, launcher/launch.py:103, as that record's lines 25 and 35 show); a
# job script's set -x trace of the srun that starts the program (woojinsoh/Megatron-DeepSpeed-Slurm
# 1b53975 megatron_ds_snmg.slurm: srun -l ... bash -c 'deepspeed ...')
MEGATRON_LAUNCH_RE = linear(
    r"(?m)^(?:[ \t]{0,8}\d{1,5}: )?(?:using world size: \d{1,6}, "
    r"|\+{1,3} srun [^\n]*?\b(?:deepspeed|torchrun|python3?|torch\.distributed\.(?:run|launch))\b"
    r"|\[[^\]\n]{1,40}\] \[INFO\] \[(?:runner\.py:\d{1,5}:main\] cmd = |launch\.py:\d{1,5}:main\] WORLD INFO DICT:))")
# metaseq main()'s logger.info(cfg), once per launch, after the first nvidia-smi line
# (facebookresearch/metaseq 5ca6005 metaseq/cli/train.py:85; the format of train.py's basicConfig)
METASEQ_START_RE = linear(r"(?m)^.*\| metaseq\.cli\.train \| \{.*'common': \{.*$")
# Alpa's run_cmd echo of each case's launch (alpa-projects/alpa e0ae8bf benchmark/util.py:50-52,
# called by osdi22_artifact/megatron/benchmark_gpt.py:43,50). print() is block-buffered when
# stdout is a file (no PYTHONUNBUFFERED): the echo then lands after the child's output, at the
# parent's exit, and ends its run instead of starting it: the echoes start runs when the file
# starts with one (unbuffered), else they end them.
# alpa-megatron-h100's patch launch-to-run makes the echo "python3 -m torch.distributed.run ..."
# (envbuild/recipes/data/alpa-megatron-h100.yaml; docs/results/h100x4-run9/alpa-run1/native.out:1)
ALPA_START_RE = linear(r"(?m)^(?:python3? -m torch\.distributed\.(?:launch|run)|torchrun) [^\n]*?"
                       r"\bbenchmark_gpt_one_case\.py [^\n]*$")
# an envbuild.smoke/1 record is the last line its run prints (envbuild/smoke/gpt.py, collective.py)
SMOKE_RECORD_RE = linear(r'(?m)^\s*\{.*"schema":\s*"envbuild\.smoke/1".*\}\s*$')
# Megatron's tokenizer prints the padded vocabulary (megatron/tokenizer/tokenizer.py _vocab_size_with_padding)
PADDED_VOCAB_RE = linear(r"padded vocab \(size: \d+\) with \d+ dummy tokens \(new size: (\d+)\)")


_READ: ContextVar[dict | None] = ContextVar("envbuild_smoke_read", default=None)
F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def reading() -> Iterator[None]:
    """Within it, a text's labels, runs, iteration lines and arguments are read once: the judge
    asks one log the same questions through its measure, its completion and its GPU count."""
    if _READ.get() is not None:
        yield
        return
    token = _READ.set({})
    try:
        yield
    finally:
        _READ.reset(token)


def _once(fn: F) -> F:
    """``fn`` of the same arguments read once within ``reading()`` (what it gives is not changed
    by its callers: they read it)."""
    @wraps(fn)
    def once(*args: Any) -> Any:
        memo = _READ.get()
        if memo is None:
            return fn(*args)
        key = (fn, *args)
        if key not in memo:
            memo[key] = fn(*args)
        return memo[key]
    return once  # type: ignore[return-value]


def label_end(line: str) -> int:
    """Where the ``srun -l`` / ``--label`` task label (``0: ``; whitespace, digits, a colon and a
    space) that starts ``line`` ends; 0 where none does."""
    i, n = 0, len(line)
    while i < n and line[i].isspace():
        i += 1
    j = i
    while j < n and line[j].isdecimal():
        j += 1
    return j + 2 if j > i and line.startswith(": ", j) else 0


@_once
def strip_task_labels(text: str) -> str:
    """Remove ``srun -l`` task labels (``0: ``) when they start most non-empty lines."""
    labelled = nonempty = 0
    for line in lines(text):
        labelled += label_end(line) > 0
        nonempty += not line.isspace() and line != ""
    if not labelled or labelled * 2 < nonempty:
        return text
    return "\n".join(line[label_end(line):] for line in lines(text))


def split_runs(parser: str, text: str) -> list[str]:
    """The runs in ``text``, in order (``srun -l`` labels may still be on): split at each
    launcher start the parser's setup prints (``MEGATRON_START_RE`` moved back to the launch
    lines before it, ``METASEQ_START_RE``, ``ALPA_START_RE``) or after each envbuild.smoke
    record. What precedes the first start (a job script's own lines) belongs to the first run;
    a file with no marker is one run."""
    if parser == "envbuild-smoke":
        return _split_after(SMOKE_RECORD_RE, text)
    if parser not in ("opt-baselines", "alpa-benchmark"):
        starts = _megatron_starts(text)
        bounds = [0] + starts + [len(text)]
        return [text[a:b] for a, b in zip(bounds, bounds[1:])]
    rx = {"opt-baselines": METASEQ_START_RE, "alpa-benchmark": ALPA_START_RE}[parser]
    starts = [m.start() for m in rx.finditer(text)]
    if parser == "alpa-benchmark" and starts and text[:starts[0]].strip():
        return _split_after(rx, text)  # buffered: output came before the first echo, each echo closes its run
    if len(starts) < 2:
        return [text]
    bounds = [0] + starts[1:] + [len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


def _megatron_starts(text: str) -> list[int]:
    """Where each run after the first starts: at its arguments header, or at the first launch
    line (``MEGATRON_LAUNCH_RE``) since the previous run's header; launch lines after the last
    header start a run killed before it printed its own (a requeued job killed while starting)."""
    events = sorted([(m.start(), True) for m in MEGATRON_START_RE.finditer(text)]
                    + [(m.start(), False) for m in MEGATRON_LAUNCH_RE.finditer(text)])
    starts: list[int] = []
    launch: int | None = None  # the first launch line since the last header
    header = False  # a header was seen
    for pos, is_header in events:
        if not is_header:
            launch = pos if launch is None else launch
            continue
        if header:
            starts.append(launch if launch is not None else pos)
        header, launch = True, None
    if header and launch is not None:
        starts.append(launch)
    return starts


def _split_after(rx: Any, text: str) -> list[str]:
    """Runs ended by a line ``rx`` matches. Text after the last one stays with the last run: a
    launcher may append the program's stderr after its stdout (launch/submit.py), and a later
    run that printed no end line cannot be told from it (its errors still count)."""
    ends = [m.end() for m in rx.finditer(text)][:-1]
    bounds = [0] + ends + [len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


@_once
def last_run(parser: str, text: str) -> tuple[str, int]:
    """(the last run's text, its ``srun -l`` labels removed; how many runs the file holds):
    ``split_runs`` of the text, labels removed from the file as a whole and again from the last
    run alone (a labelled run beside an unlabelled one: neither is most of the file's lines)."""
    runs = split_runs(parser, strip_task_labels(text))
    return strip_task_labels(runs[-1]), len(runs)


def _window(unit: str, kept: list[dict[str, Any]], key: str, logged: int) -> dict[str, Any]:
    """The measurement window: the logged rows after the warm-up (``unit``: what a row is),
    the first and last of them (``key``), how many were used and logged."""
    return {"unit": unit, "first": kept[0].get(key) if kept else None,
            "last": kept[-1].get(key) if kept else None, "used": len(kept), "logged": logged}


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _num(text: str) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _number(text: str) -> bool:
    """Whether ``text`` is all of a ``NUMBER``: a sign, a digit, digits and dots, an exponent."""
    body = text[1:] if text.startswith(("-", "+")) else text
    if not body[:1].isdecimal():
        return False
    cut = min((i for i in (body.find("e"), body.find("E")) if i >= 0), default=len(body))
    mantissa, exponent = body[:cut], body[cut + 1:]
    if not mantissa.replace(".", "").isdecimal():
        return False
    if cut == len(body):
        return True
    return (exponent[1:] if exponent.startswith(("-", "+")) else exponent).isdecimal()


def field(text: str) -> tuple[str, float] | None:
    """A ``key: value`` field of a Megatron iteration line: (key, value) where ``text`` is
    whitespace, a key (a letter, then letters, digits, spaces and ``_()/-``), whitespace, ``:``,
    whitespace, a number (``NUMBER``), ``nan`` or ``inf``, whitespace; None otherwise.

    >>> field(" elapsed time per iteration (ms): 812.3 "), field(" a  b :"), field(" x: 1.2.3 ")
    (('elapsed time per iteration (ms)', 812.3), None, None)
    """
    key, colon, value = text.partition(":")  # the key holds no colon: the first one ends it
    key, value = key.strip(), value.strip()
    if not colon or not key or key[0] not in _LETTERS or not _KEY.issuperset(key):
        return None
    if value not in ("nan", "inf") and not _number(value):
        return None
    try:
        return key, float(value)
    except ValueError:  # digits and dots that are no number ("1.2.3")
        return None


_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_KEY = _LETTERS | frozenset("0123456789 _()/-")


@_once
def iteration_lines(text: str) -> list[dict[str, Any]]:
    """Every Megatron ``iteration N/ M | key: value | ...`` line as a dict of numbers."""
    rows = []
    for line in lines(text):
        m = ITER_RE.search(line)
        if not m:
            continue
        row: dict[str, Any] = {"iteration": int(m.group(1)), "train_iters": int(m.group(2))}
        for part in m.group(3).split("|"):
            if (got := field(part)) is not None:
                row[sys.intern(got[0])] = got[1]  # one copy of each key, however many rows
        rows.append(row)
    return rows


@_once
def megatron_arguments(text: str) -> dict[str, str]:
    """The ``  name ........ value`` block Megatron prints at start-up (first value wins)."""
    args: dict[str, str] = {}
    for line in lines(text):
        m = ARG_RE.search(line)
        if m and m.group(1) not in args:
            args[m.group(1)] = m.group(2)
    return args


def iteration_ms(row: dict[str, Any]) -> float | None:
    """Iteration time in ms from either the (ms) or the (s) spelling of the field."""
    for key, scale in (("elapsed time per iteration (ms)", 1.0), ("elapsed time per iteration (s)", 1000.0),
                       ("avg elapsed time per iteration (ms)", 1.0)):
        if key in row:
            return row[key] * scale
    return None


def megatron_model_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int,
                         recompute: bool = False) -> float:
    """FLOPs of one iteration (Narayanan et al. 2021, eq. 3):
    ``F = k * B * s * l * h^2 * (1 + s/(6h) + V/(16 l h))`` with k = 72, or 96 when the
    forward pass is recomputed (full activation checkpointing)."""
    k = 96 if recompute else 72
    return k * batch * seq * layers * hidden ** 2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))


def _truthy(value: str | None) -> bool:
    return str(value).strip().lower() in ("true", "1", "full", "uniform")


def parse_megatron_pretrain(text: str, *, warmup: int = 1, layers: int | None = None,
                            hidden: int | None = None, seq: int | None = None, vocab: int | None = None,
                            gpus: int | None = None, recompute: bool | None = None) -> dict[str, Any]:
    """Megatron-LM iteration lines -> iteration time, samples/s and (with a shape) TFLOP/s/GPU.

    Model shape options default to Megatron's printed arguments (num_layers, hidden_size,
    seq_length, padded_vocab_size or vocab, world_size, checkpoint_activations /
    recompute_granularity) when the log has them.
    """
    rows = iteration_lines(text)
    kept = rows[warmup:]
    args = megatron_arguments(text)
    out: dict[str, Any] = {"iterations_logged": len(rows), "iterations_used": len(kept)}
    times = [t for t in (iteration_ms(r) for r in kept) if t]
    batches = [r.get("global batch size") for r in kept]
    if not times:
        return out
    out["iteration_ms"] = _mean(times)
    out["window"] = _window("iteration", kept, "iteration", len(rows))
    values: dict[str, list[float]] = {"iteration_ms": times}
    out["values"] = values
    if all(batches) and len(times) == len(kept):
        values["samples_per_s"] = [b / (t / 1000.0) for b, t in zip(batches, times)]
        out["samples_per_s"] = _mean(values["samples_per_s"])
        out["global_batch_size"] = int(batches[-1])
    losses = [r["lm loss"] for r in kept if "lm loss" in r]
    if losses:
        out["lm_loss_first"], out["lm_loss_last"] = losses[0], losses[-1]
    layers = layers or _num(args.get("num_layers")) and int(_num(args["num_layers"]))
    hidden = hidden or _num(args.get("hidden_size")) and int(_num(args["hidden_size"]))
    seq = seq or _num(args.get("seq_length")) and int(_num(args["seq_length"]))
    vocab = vocab or _padded_vocab(text) or (_num(args.get("padded_vocab_size")) and int(_num(args["padded_vocab_size"])))
    gpus = gpus or (_num(args.get("world_size")) and int(_num(args["world_size"]))) or 1
    if recompute is None:
        recompute = _truthy(args.get("checkpoint_activations")) or args.get("recompute_granularity") == "full"
    if layers and hidden and seq and vocab and "samples_per_s" in out:
        fl = megatron_model_flops(out["global_batch_size"], seq, layers, hidden, vocab, recompute)
        out["tflops_per_gpu"] = fl / (out["iteration_ms"] / 1000.0) / gpus / 1e12
        out["tokens_per_s"] = out["samples_per_s"] * seq
        values["tflops_per_gpu"] = [fl / (t / 1000.0) / gpus / 1e12 for t in times]
        values["tokens_per_s"] = [v * seq for v in values["samples_per_s"]]
        out["model"] = {"layers": layers, "hidden": hidden, "seq": seq, "vocab": vocab,
                        "gpus": gpus, "recompute": recompute}
    return out


def _padded_vocab(text: str) -> int | None:
    m = PADDED_VOCAB_RE.search(text)
    return int(m.group(1)) if m else None


def parse_megatron_deepspeed(text: str, *, warmup: int = 1, **shape: Any) -> dict[str, Any]:
    """Megatron-DeepSpeed lines: Megatron's metrics plus the printed samples/s, tgs and TFLOPs."""
    out = parse_megatron_pretrain(text, warmup=warmup, **shape)
    kept = iteration_lines(text)[warmup:]
    for key, name in (("samples per second", "samples_per_s_printed"), ("TFLOPs", "tflops_printed"),
                      ("tokens per gpu per second (tgs)", "tgs")):
        printed = [r[key] for r in kept if key in r]
        if printed:
            out[name] = _mean(printed)
            out.setdefault("values", {})[name] = printed
    if "tflops_printed" in out and "tflops_per_gpu" not in out:
        out["tflops_per_gpu"] = out["tflops_printed"]
        out["values"]["tflops_per_gpu"] = out["values"]["tflops_printed"]
    ds = [float(v) for v in DS_TIMER_RE.findall(text)]
    if len(ds) > warmup:
        out["ds_samples_per_s"] = _mean(ds[warmup:])
    return out


def trace_iterations(text: str) -> list[dict[str, Any]]:
    """MegatronApp's per-rank ``rank R iteration starts/ends at timestamp T%`` lines, paired per
    rank in order: one row per iteration with its wall time across ranks (first start to last
    end) and the ranks seen."""
    starts: dict[int, list[float]] = {}
    ends: dict[int, list[float]] = {}
    for m in TRACE_RE.finditer(text):
        (starts if m.group(2) == "starts" else ends).setdefault(int(m.group(1)), []).append(float(m.group(3)))
    ranks = sorted(set(starts) & set(ends))
    n = min((min(len(starts[r]), len(ends[r])) for r in ranks), default=0)
    rows = []
    for i in range(n):
        first = min(starts[r][i] for r in ranks)
        last = max(ends[r][i] for r in ranks)
        rows.append({"iteration": i + 1, "ms": (last - first) * 1000.0, "ranks": len(ranks)})
    return rows


def parse_megatronapp(text: str, *, warmup: int = 1, **shape: Any) -> dict[str, Any]:
    """MegatronApp's trace file: the vendored Megatron core_v0.4.0 iteration lines (last rank),
    plus the per-rank iteration timestamps of its train loop (``trace_iteration_ms``: first
    start to last end across ranks, averaged after ``warmup``)."""
    out = parse_megatron_pretrain(text, warmup=warmup, **shape)
    rows = trace_iterations(text)
    kept = rows[warmup:]
    if kept:
        out["trace_iterations"] = len(rows)
        out["trace_ranks"] = kept[-1]["ranks"]
        out["trace_iteration_ms"] = _mean([r["ms"] for r in kept])
        values = out.setdefault("values", {})
        values["trace_iteration_ms"] = [r["ms"] for r in kept]
        if "iteration_ms" not in out:
            out["iteration_ms"] = out["trace_iteration_ms"]
            values["iteration_ms"] = values["trace_iteration_ms"]
            out["window"] = _window("iteration", kept, "iteration", len(rows))
    return out


def parse_alpa_benchmark(text: str) -> dict[str, Any]:
    """Alpa's result: the ``value`` dict of the line rank 0 prints, else of the TSV line (the
    last one when there are several cases); ``tflops`` there is per GPU with activation
    checkpointing counted (compute_gpt_tflops(..., True))."""
    import ast

    found: list[tuple[str, dict]] = []
    for line in lines(text):
        m = ALPA_PRINTED_RE.search(line)
        raw = (m.group(1), m.group(2)) if m else None
        if raw is None:
            fields = line.rstrip("\n").split("\t")
            if len(fields) == 8 and fields[0] and fields[6].startswith("{"):
                raw = (fields[5], fields[6])
        if raw is None:
            continue
        try:
            value = ast.literal_eval(NUMPY_SCALAR_RE.sub(lambda m: m.group(1), raw[1]))
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, dict):
            found.append((raw[0], value))
    out: dict[str, Any] = {"results": len(found)}
    if found:
        method, value = found[-1]
        out["method"] = method
        if _num(value.get("tflops")) is not None:
            out["tflops_per_gpu"] = float(value["tflops"])
            # one figure per case: the mean over benchmark_func's repeats after its warm-up
            # (benchmark/util.py benchmark_func(warmup=1, repeat=3, number=5)); no per-step values
            out["values"] = {"tflops_per_gpu": [out["tflops_per_gpu"]]}
            out["window"] = {"unit": "result", "first": len(found), "last": len(found), "used": 1,
                             "logged": len(found)}
        count = value.get("parameter_count", value.get("param_count"))
        if _num(count) is not None:
            out["parameter_count_b"] = float(count)
    return out


def parse_opt_baselines(text: str, *, warmup: int = 1) -> dict[str, Any]:
    """metaseq ``train_inner`` JSON lines -> mean words/s (``wps``), updates/s, words/batch."""
    inner, summary = [], None
    for line in lines(text):
        m = METASEQ_RE.search(line)
        if not m:
            continue
        try:
            record = json.loads(m.group(2))
        except ValueError:
            continue
        if m.group(1) == "train":
            summary = record
        else:
            inner.append(record)
    kept = [r for r in inner[warmup:] if _num(r.get("wps")) not in (None, 0.0)]
    out: dict[str, Any] = {"updates_logged": len(inner), "updates_used": len(kept)}
    per_row: dict[str, list[float]] = {}
    for key, name in (("wps", "wps"), ("ups", "ups"), ("wpb", "wpb"), ("bsz", "bsz")):
        values = [v for v in (_num(r.get(key)) for r in kept) if v is not None]
        if values:
            out[name] = _mean(values)
            per_row[name] = values
    if kept:
        out["values"] = per_row
        out["window"] = _window("update", [{"update": int(_num(r.get("num_updates")) or 0)} for r in kept],
                                "update", len(inner))
        out["num_updates"] = int(_num(kept[-1].get("num_updates")) or 0)
        losses = [v for v in (_num(r.get("loss")) for r in kept) if v is not None]
        if losses:
            out["loss_first"], out["loss_last"] = losses[0], losses[-1]
    # the end-of-epoch line (progress.print(stats, tag="train")) prefixes every key with "train_"
    summary_wps = _num(summary.get("train_wps", summary.get("wps"))) if summary else None
    if summary_wps is not None:
        out["wps_summary"] = summary_wps
    return out


def parse_envbuild_smoke(text: str) -> dict[str, Any]:
    """The last ``envbuild.smoke/1`` JSON object in the text, flattened to its metrics."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("schema") == "envbuild.smoke/1":
            keep = ("kind", "ok", "tokens_per_s", "tflops", "peak_tflops", "mfu", "max_busbw_gbps",
                    "max_algbw_gbps", "status", "error")
            out = {k: obj[k] for k in keep if k in obj}
            if isinstance(obj.get("loss"), dict):
                out["loss_last"] = obj["loss"].get("last")
            return out
    return {}


# The metric names recipes use (benchmark.metric) for the parsers' own keys.
ALIASES = {
    "words_per_second": "wps",
    "samples_per_second": "samples_per_s",
    "iteration_time_ms": "iteration_ms",
    "tflops": "tflops_per_gpu",
    "tokens_per_second": "tokens_per_s",
}


def with_aliases(metrics: dict[str, Any]) -> dict[str, Any]:
    """Add the recipe-facing metric names (``ALIASES``) next to the parsers' own keys (in
    ``values`` too)."""
    out = dict(metrics)
    values = dict(out["values"]) if isinstance(out.get("values"), dict) else None
    for alias, key in ALIASES.items():
        if key in out and alias not in out:
            out[alias] = out[key]
        if values is not None and key in values and alias not in values:
            values[alias] = values[key]
    if values is not None:
        out["values"] = values
    return out


def parse(name: str, text: str, **options: Any) -> dict[str, Any]:
    """Run the parser ``name`` on the last run in ``text`` (``split_runs``) and add the
    recipe-facing aliases; ``runs`` is how many runs the file holds, ``values`` each metric's
    per-row values over the measurement ``window`` (the logged rows after the warm-up)."""
    if name not in NATIVE_PARSERS:
        from envbuild.errors import InputError
        raise InputError(f"unknown benchmark parser {name!r}",
                         hint="use one of: " + ", ".join(sorted(NATIVE_PARSERS)))
    run, runs = last_run(name, text)
    out = with_aliases(NATIVE_PARSERS[name](run, **options))
    out["runs"] = runs
    return out


NATIVE_PARSERS: dict[str, Callable[..., dict[str, Any]]] = {
    "opt-baselines": parse_opt_baselines,
    "megatron-pretrain": parse_megatron_pretrain,
    "megatron-deepspeed": parse_megatron_deepspeed,
    "megatronapp": parse_megatronapp,
    "alpa-benchmark": parse_alpa_benchmark,
    "envbuild-smoke": parse_envbuild_smoke,
}
