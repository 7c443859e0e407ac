"""``envbuild parse``: judge a native benchmark's output for a recipe and a GPU.

Thin: parses its arguments, calls the parse flow (``envbuild.flows.parse``), prints.
"""

from __future__ import annotations

from pathlib import Path

import click

from envbuild.cli import cli
from envbuild.cli.options import complete_recipe
from envbuild.cli.output import emit_json
from envbuild.display import visible


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


@cli.command("parse")
@click.argument("recipe", shell_complete=complete_recipe)
@click.argument("logfile", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--gpu", default=None, metavar="MODEL",
              help="The GPU model the run was measured on, as nvidia-smi names it (\"NVIDIA H100 80GB HBM3\") "
                   "[the model nvidia-smi lines in the log name]: thresholds, references and published figures "
                   "apply only on their own model.")
@click.option("--gpus", type=click.IntRange(1), default=None, metavar="N",
              help="How many GPUs the run used [what the log prints: Megatron's world_size, DeepSpeed's "
                   "dist_world_size, metaseq's 'training on N devices', Alpa's num_devices_per_host]; given, it "
                   "overrides the log's and the verdict says where they differ.")
@click.option("--warmup", type=click.IntRange(0), default=None,
              help="Logged iterations/updates left out at the start [the recipe's benchmark window].")
@click.option("--explain", is_flag=True,
              help="Also say which rule of the recipe's reader read which line of the judged run.")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON.")
def parse_cmd(recipe: str, logfile: Path, gpu: str | None, gpus: int | None, warmup: int | None,
              explain: bool, as_json: bool) -> int:
    """Judge LOGFILE, a native benchmark's output, for RECIPE on the GPU --gpu names: print the
    metric over its window, what it was compared with and the verdict.

    \b
    LOGFILE is what the setup itself printed: Alpa's benchmark_gpt.py output or its
    megatron_results_e2e.tsv, Megatron's or Megatron-DeepSpeed's training log, metaseq's
    opt-baselines output, MegatronApp's trace_pipeline_*.txt, or a Slurm output file
    (%x-%j.out; srun -l labels are removed).
    The run must have completed (its planned iterations or updates, its end-of-training line,
    no non-finite loss, NaN iterations or error lines) to pass, whatever its throughput. Its
    figure is then compared with the recipe's threshold when the run's GPU is the model the
    threshold was measured on (per GPU when counts differ), else with the runs recorded on that
    GPU model and count in docs/results (at least 3: PASS within their median less the spread
    they show, 5 % at least; runs spread over 8 % judge nothing); with neither it is NOT JUDGED,
    naming the GPU models that have a reference.
    Exit 0: PASS; 1: FAIL (the run did not complete, or its figure misses the threshold or the
    reference); 2: NOTHING FOUND (the metric is not in the file); 5: NOT JUDGED.

    \b
    A recipe's own reader (parser: declared, and its log: rules) is read the same way;
    --explain lists which rule read which line.

    \b
    Example:  envbuild parse alpa-megatron-h100 h100-native.out --gpu "NVIDIA H100 80GB HBM3"
              envbuild parse opt-175b-azure train.log --gpu "NVIDIA A100-SXM4-80GB" --gpus 8
              envbuild parse megatron-deepspeed-slurm megatron_ds_snmg-4242.out --json
    """
    from envbuild.flows.parse import ParseRequest, parse

    def echo(line: str) -> None:  # what the log holds, its control bytes visible
        click.echo(visible(line))

    got = parse(ParseRequest(recipe=recipe, log=logfile, gpu=gpu, gpus=gpus, warmup=warmup, explain=explain))
    v = got.verdict
    if as_json:
        emit_json(got.to_dict())
        return got.exit_code
    unit = f" {v.unit}" if v.unit else ""
    echo(f"{got.recipe}: {v.metric} = {_fmt(v.value)}{unit} ({got.parser} parser, {logfile})")
    if v.window is not None:
        w = v.window
        echo(f"window: n {w.n}, median {_fmt(w.median)}, min {_fmt(w.min)}, max {_fmt(w.max)}"
                   + (f" ({w.warmup} logged value(s) left out at the start)" if w.warmup else ""))
    echo(f"gpu: {v.gpus or '?'} x {v.gpu or 'not given (--gpu MODEL)'}")
    if got.threshold is None:
        echo("threshold: none")
    else:
        rel = ">=" if v.higher_is_better else "<="
        on = f" on {got.threshold_gpus or '?'} x {got.threshold_gpu}" if got.threshold_gpu else " on any hardware"
        src = f" ({got.threshold_source})" if got.threshold_source else ""
        echo(f"threshold: {rel} {_fmt(got.threshold)}{unit}{on}{src}")
    if v.compared is not None and v.compared.kind == "reference":
        c = v.compared
        echo(f"reference: {_fmt(c.value)}{unit} on {c.gpus} x {c.gpu} ({c.source}, sha256 {(c.sha256 or '?')[:12]})")
    pub = v.published
    if pub is not None:
        on = f" on {pub.gpus or '?'} x {pub.gpu}" if pub.gpu else ""
        pct = (f", measured = {pub.percent:.1f} % of it" if pub.percent is not None else f"; not compared: {pub.why}")
        echo(f"published: {_fmt(pub.value)}{unit}{on} ({pub.source}){pct}")
    if v.completion is not None:
        echo(f"completion: {v.completion.state}: {v.completion.detail}")
    for hit in got.explained or []:
        echo(f"  line {hit['line']}: {hit['rule']} read {hit['read']}: {hit['text']}")
    echo(f"verdict: {v.verdict}: {v.reason}")
    return got.exit_code
