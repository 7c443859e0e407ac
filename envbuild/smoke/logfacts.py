"""The GPU count and model a benchmark's own output prints (pure).

A verdict compares figures per GPU model and count, so it reads them where the setup's code
prints them, not from what a caller guessed: ``log_gpus(parser, text) -> LogGpus | None`` (the
text of one run: ``envbuild.smoke.native.last_run``). Each row of ``COUNTS`` and ``MODELS`` is
one printed line: its regex (bounded, applied to lines cut at ``LINE_CAP`` characters), the
parsers whose setups print it, and the printing code it follows (repository, commit, file:line,
or the recorded run in docs/results that shows the line). The first row that matches wins: the
program's own world size before its launcher's.

    >>> log_gpus("opt-baselines", "2026-11-26 08:11:17 | INFO | metaseq.cli.train | "
    ...          "training on 8 devices (GPUs/TPUs)\\n").count
    8

``taken(printed, gpu, gpus, override=...)`` says which model and count a verdict uses: given ones
that ``override`` (``envbuild parse --gpu/--gpus``) win, and a disagreement with the log is
said; otherwise (a node's facts, a stored verdict) the printed count wins and the given one
fills in where the log prints none. The model the log prints (nvidia-smi's lines, metaseq's
workers) is used only where none is given. The count is never read from nvidia-smi: it lists the
GPUs the node shows, not the ones the run used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from envbuild.recipes.linear import MAX_LINE
from envbuild.recipes.linear import linear
from envbuild.smoke.hardware import comparison
from envbuild.smoke.logread import lines

LINE_CAP = MAX_LINE  # characters of a line the regexes see (metaseq's config line is ~13K; its world size at ~1.1K)

MEGATRON = frozenset({"megatron-pretrain", "megatron-deepspeed", "megatronapp"})
DEEPSPEED = frozenset({"megatron-deepspeed"})
ALPA = frozenset({"alpa-benchmark"})
METASEQ = frozenset({"opt-baselines"})
ANY = MEGATRON | ALPA | METASEQ | {"envbuild-smoke"}


@dataclass(frozen=True)
class Row:
    """One printed line that says a GPU count (or model): ``read`` turns its match into the value."""

    name: str
    parsers: frozenset[str]
    rx: Any  # an RE2 pattern (envbuild.recipes.linear.compile_linear)
    read: Callable[[Any], int | str | None]
    source: str
    say: Callable[[Any], str] | None = None  # the words shown for the match (default: its text)


@dataclass(frozen=True)
class LogGpus:
    """What the run's output prints: the GPU ``count`` and ``model`` (None where it prints none),
    the ``line`` the count was read from (else the model's), the words of it that say so
    (``said``) and the printing code it follows (``source``)."""

    count: int | None
    model: str | None
    line: str
    said: str
    source: str
    model_source: str | None = None
    model_said: str | None = None  # what printed the model ("nvidia-smi -L", metaseq's worker list)


@dataclass(frozen=True)
class Taken:
    """The GPU model and count a verdict uses, and what it says where the log disagrees."""

    gpu: str | None
    gpus: int | None
    note: str | None = None


def _int(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() and int(text) > 0 else None


def _product(m: Any) -> int | None:
    a, b = _int(m.group(1)), _int(m.group(2) or "1")
    return a * b if a and b else None


# an Alpa value NumPy >= 2 may write as np.int64(1) (native.NUMPY_SCALAR_RE); num_hosts is a plain int at e0ae8bf
ALPA_INT = r"(?:np\.int\d{0,2}\()?(\d{1,5})\)?"

COUNTS: list[Row] = [
    Row("alpa-result-printed", ALPA,
        linear(r"\bnum_hosts: " + ALPA_INT + r"  num_devices_per_host: " + ALPA_INT + r"  "),
        _product,
        "Alpa's write_tsv() print line, 'head: value  ' pairs (alpa-projects/alpa e0ae8bf benchmark/util.py:10-23), "
        "with the heads of osdi22_artifact/megatron/benchmark_gpt_one_case.py:140-143: num_hosts x "
        "num_devices_per_host"),
    Row("alpa-result-tsv", ALPA,
        linear(r"^[^\t]{1,64}\t[^\t]{1,64}\t" + ALPA_INT + r"\t" + ALPA_INT + r"\t[^\t]{1,64}\t[^\t]{1,64}\t\{"),
        _product,
        "Alpa's write_tsv() line appended to megatron_results_e2e.tsv, the same values tab-separated "
        "(alpa-projects/alpa e0ae8bf benchmark/util.py:10-23; benchmark_gpt_one_case.py:140-143)",
        lambda m: f"num_hosts {m.group(1)}, num_devices_per_host {m.group(2)} in the TSV line"),
    Row("megatron-arguments", MEGATRON | ALPA,
        linear(r"^(?:\d{1,5}: |.{0,80}\]:)? {0,4}world_size \.{2,60} (\d{1,6})\s*$"),
        lambda m: _int(m.group(1)),
        "Megatron's _print_args block, '  {} {} {}'.format(arg, '.' * (48 - len(arg)), value), rank 0 "
        "(microsoft/Megatron-DeepSpeed 87476ced megatron/arguments.py:249-261; argonne-lcf/Megatron-DeepSpeed "
        "e4bac701 megatron/arguments.py:454-466; OpenSQZ/MegatronApp 1bed2a72 Megatron/megatron/arguments.py:"
        "414-426; NVIDIA/Megatron-LM b31e129 megatron/arguments.py _print_args); DeepSpeed's own config print "
        "'[config.py:N:print]   world_size ...' is its data-parallel size and is not read"),
    Row("megatron-using-world-size", MEGATRON | ALPA,
        linear(r"^using world size: (\d{1,6}), data-parallel[- ]size: "),
        lambda m: _int(m.group(1)),
        "Megatron's parse_args(), rank 0: 'using world size: N, data-parallel-size: ...' (microsoft/"
        "Megatron-DeepSpeed 87476ce megatron/arguments.py, docs/results/h200x4-run8/mds-run2/native.out:117; "
        "NVIDIA/Megatron-LM b31e129 under Alpa, docs/results/h100x4-run9/alpa-run1/native.out:2; OpenSQZ/"
        "MegatronApp 1bed2a72 Megatron/megatron/arguments.py 'data-parallel size: ...', docs/results/"
        "h200x4-run8/mapp-run1/native.out:16)"),
    Row("deepspeed-launcher", DEEPSPEED,
        linear(r"\[launch\.py:\d{1,5}:main\] (?P<said>dist_world_size=(\d{1,6}))\s*$"),
        lambda m: _int(m.group(2)),
        "DeepSpeed's launcher, once per node at start: 'dist_world_size=N' (microsoft/DeepSpeed v0.6.3 dda0336 "
        "launcher/launch.py:123, as the '[launch.py:123:main]' of docs/results/h200x4-run8/mds-run2/native.out:37 "
        "shows); the ranks' world_size= reprs (FSDP's in metaseq) are not read"),
    Row("metaseq-training-on", METASEQ,
        linear(r"\| metaseq\.cli\.train \| (?P<said>training on (\d{1,6}) devices) \(GPUs/TPUs\)"),
        lambda m: _int(m.group(2)),
        "metaseq's main(): logger.info('training on {} devices (GPUs/TPUs)'), the distributed world size "
        "(facebookresearch/metaseq 4de251ff metaseq/cli/train.py, docs/results/h200x4-run8/opt-run1/native.out:53)"),
    Row("metaseq-config", METASEQ,
        linear(r"'distributed_world_size': (\d{1,6})\b"),
        lambda m: _int(m.group(1)),
        "metaseq's main(): logger.info(cfg), DistributedTrainingConfig's distributed_world_size among it "
        "(facebookresearch/metaseq 5ca6005 metaseq/cli/train.py:85; 4de251ff metaseq/cli/train.py:115, "
        "configs.py:210)"),
    Row("alpa-launch-echo", ALPA,
        linear(r"^(?:python3? -m torch\.distributed\.(?:launch|run)|torchrun) --nproc_per_node (\d{1,4})"
                   r"(?: --nnodes (\d{1,5}))? "),
        _product,
        "Alpa's run_cmd echo of each case's launch, --nproc_per_node [x --nnodes] (alpa-projects/alpa e0ae8bf "
        "benchmark/util.py:50-52, called by osdi22_artifact/megatron/benchmark_gpt.py:43-48; "
        "'torch.distributed.run' after alpa-megatron-h100's patch launch-to-run)"),
]

NVIDIA_SMI = ("nvidia-smi, the GPUs the node shows (their model only: the run may use fewer): "
              "'nvidia-smi -L' as docs/results/h200x4-run8/node.txt:2-5 holds it, the table as "
              "docs/results/h200x4-run8/mapp-hung/stall/nvidia-smi.txt:9 holds it (driver 580.159.04)")
MODELS: list[Row] = [
    Row("nvidia-smi-L", ANY, linear(r"^GPU \d{1,3}: ([^()]{2,80}?) \(UUID: GPU-"),
        lambda m: m.group(1).strip(), NVIDIA_SMI, lambda m: "nvidia-smi -L"),
    Row("nvidia-smi-table", ANY,
        linear(r"^\|\s{1,6}\d{1,3}\s{1,6}((?:NVIDIA|Tesla|Quadro)[ -][^|]{1,40}?)\s{2,40}(?:On|Off)\s{1,4}\|"),
        lambda m: None if m.group(1).endswith("...") else m.group(1).strip(), NVIDIA_SMI, lambda m: "nvidia-smi"),
    Row("metaseq-cuda-environment", METASEQ,
        linear(r"\| metaseq\.utils \| rank {0,4}\d{1,5}: capabilities = {0,4}[\d.]{1,6} {0,4}; "
                   r"total memory = [\d.]{1,12} GB ; name = (\S[^\t]{0,80}?)\s*$"),
        lambda m: m.group(1).strip(),
        "metaseq's CUDA environment of each data-parallel worker, 'rank {:3d}: capabilities = {:^6}; total "
        "memory = {:.3f} GB ; name = {:40s}' (facebookresearch/metaseq 4de251ff metaseq/utils.py, called by "
        "metaseq/cli/train.py main(); docs/results/h200x4-run8/opt-run1/native.out:50-52)",
        lambda m: "metaseq's CUDA environment lines"),
]


DOTS = linear(r"\.{4,}")


def _said(m: Any) -> str:
    """The words of a matched line that say the count (dot leaders and tabs shortened)."""
    words = m.group("said") if "said" in m.re.groupindex else m.group(0)
    return DOTS.sub("...", " ".join(words.split())).strip(" |{")


def _lines(text: str) -> Iterator[str]:
    """The lines of ``text``, each cut at ``LINE_CAP`` characters, one at a time."""
    return (line[:LINE_CAP].rstrip("\r") for line in lines(text))


def _first(rows: list[Row], parser: str, printed: Iterable[str]) -> tuple[Row, Any, str] | None:
    """The first row (in the table's order) that matches a line, with its first match."""
    found: dict[int, tuple[Any, str]] = {}
    wanted = [i for i, row in enumerate(rows) if parser in row.parsers]
    for line in printed:
        for i in wanted:
            if i not in found and (m := rows[i].rx.search(line)) and rows[i].read(m):
                found[i] = (m, line)
        if wanted and wanted[0] in found:
            break
    if not found:
        return None
    i = min(found)
    return rows[i], found[i][0], found[i][1]


def _model(parser: str, printed: Iterable[str]) -> tuple[str, Row, str, str] | None:
    """(the one GPU model the ``MODELS`` lines name, their row, the first line, what printed
    it); None where they name none, or several."""
    names: dict[str, tuple[Row, Any, str]] = {}
    for line in printed:
        for row in MODELS:
            if parser in row.parsers and (m := row.rx.search(line)) and (name := row.read(m)):
                names.setdefault(str(name), (row, m, line))
    if len(names) != 1:
        return None
    (name, (row, m, line)), = names.items()
    return name, row, line, row.say(m) if row.say else row.name


def log_gpus(parser: str, text: str) -> LogGpus | None:
    """The GPU count (and model) ``text``, one run's output, prints, for the setups that
    ``parser`` reads; None where it prints neither."""
    count = _first(COUNTS, parser, _lines(text))
    model = _model(parser, _lines(text))
    if count is None and model is None:
        return None
    name, mrow, mline, by = model if model else (None, None, None, None)
    if count is not None:
        row, m, line = count
        return LogGpus(count=int(row.read(m) or 0), model=name, line=line.strip()[:300],
                       said=row.say(m) if row.say else _said(m), source=row.source,
                       model_source=mrow.source if mrow else None, model_said=by)
    return LogGpus(count=None, model=name, line=str(mline).strip()[:300], said=str(name),
                   source=mrow.source if mrow else "", model_source=mrow.source if mrow else None, model_said=by)


def taken(printed: LogGpus | None, gpu: str | None, gpus: int | None, *, override: bool = False) -> Taken:
    """The GPU model and count a verdict is judged for (module docstring), and the note saying
    where what was given and what the log prints differ."""
    notes = []
    if printed is None:
        return Taken(gpu=gpu, gpus=gpus)
    count, model = printed.count, printed.model
    if count is not None and gpus is not None and gpus != count and override:
        many = "s" if count != 1 else ""
        notes.append(f"the log prints {count} GPU{many} ({printed.said}), --gpus says {gpus}: judged as {gpus}")
    use = gpus if override and gpus is not None else count if count is not None else gpus
    if model and gpu and not comparison(model, gpu, "printed").comparable:
        by = "--gpu says" if override else "the GPU given is"
        notes.append(f"the log prints the GPU model {model} ({printed.model_said}), {by} {gpu}: judged as {gpu}")
    return Taken(gpu=gpu or model, gpus=use, note="; ".join(notes) or None)
