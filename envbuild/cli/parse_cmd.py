"""``envbuild parse``: read a native benchmark's output with the recipe's parser, give a verdict.

Thin: reads the file, calls ``envbuild.smoke.native.parse`` and ``evaluate``, prints.
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path

import click

from envbuild.cli import cli
from envbuild.cli.options import complete_recipe
from envbuild.cli.output import emit_json
from envbuild.errors import NOT_JUDGED, InputError

NOTHING_FOUND = 2
BELOW_THRESHOLD = 1  # also a run that did not complete
EXIT = {"pass": 0, "below": BELOW_THRESHOLD, "incomplete": BELOW_THRESHOLD, "nothing": NOTHING_FOUND,
        "not-judged": NOT_JUDGED}
VERDICT_WORDS = {"pass": "PASS", "below": "FAIL", "incomplete": "FAIL", "nothing": "NOTHING FOUND",
                 "not-judged": "NOT JUDGED"}


def parse_log(recipe, text: str, warmup: int | None = None, gpu: str | None = None) -> dict:
    """The parse result of ``text`` for ``recipe`` as data: metric, value, unit, threshold,
    published figure (and the value as a percentage of it), verdict and every metric found.

    The measured value is a percentage of the published figure only when ``gpu`` (the run's
    GPU) is the model the figure was measured on (``envbuild.smoke.hardware``); otherwise the
    result says why it is not compared.

    ``status`` is ``pass`` (the run completed and the metric is on the right side of the
    threshold), ``not-judged`` (completed, no threshold), ``below`` (a threshold missed),
    ``incomplete`` (the run stopped early, diverged or printed an error:
    ``envbuild.smoke.completion``, whatever its throughput) or ``nothing`` (the metric is not in
    the text)."""
    from envbuild.smoke.completion import judge
    from envbuild.smoke.hardware import comparison
    from envbuild.smoke.native import NATIVE_PARSERS, parse

    bench = recipe.benchmark
    if bench is None:
        raise InputError(f"recipe {recipe.name} has no benchmark to parse",
                         hint="envbuild show RECIPE lists its benchmark")
    opts = {}
    fn = NATIVE_PARSERS.get(bench.parser)
    if warmup is not None and fn is not None and "warmup" in inspect.signature(fn).parameters:
        opts["warmup"] = warmup
    metrics = parse(bench.parser, text, **opts)
    verdict = judge(bench.parser, text, metrics, bench.metric, bench.threshold, bench.higher_is_better)
    value = verdict.value
    done = verdict.completion or {}
    status = ("nothing" if value is None else
              "incomplete" if done.get("state") not in (None, "complete") else
              {"pass": "pass", "not-judged": "not-judged"}.get(verdict.status, "below"))
    published = None
    if bench.published is not None:
        same = comparison(bench.published.gpu, gpu)
        pct = (value / bench.published.value * 100.0
               if same.comparable and value is not None and bench.published.value else None)
        published = {"value": bench.published.value, "source": bench.published.source,
                     "gpu": bench.published.gpu, "run_gpu": gpu, "compared": same.comparable,
                     "why": same.why, "percent": pct if pct is None or math.isfinite(pct) else None}
    numbers = {k: v for k, v in metrics.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return {"recipe": recipe.name, "parser": bench.parser, "metric": bench.metric, "value": value,
            "unit": bench.unit, "higher_is_better": bench.higher_is_better,
            "threshold": bench.threshold,
            "threshold_source": bench.source.url if bench.source else None,
            "published": published, "status": status, "verdict": VERDICT_WORDS[status],
            "reason": verdict.reason, "completion": verdict.completion, "metrics": numbers}


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


@cli.command("parse")
@click.argument("recipe", shell_complete=complete_recipe)
@click.argument("logfile", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--warmup", type=click.IntRange(0), default=None,
              help="Logged iterations/updates left out at the start [the parser's: 1].")
@click.option("--gpu", default=None, metavar="MODEL",
              help="The GPU the run was measured on, as nvidia-smi names it: the published figure is "
                   "compared only when it was measured on the same model.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def parse_cmd(recipe: str, logfile: Path, warmup: int | None, gpu: str | None, as_json: bool) -> int:
    """Read LOGFILE, a native benchmark's output, with RECIPE's parser; print the metric, the
    threshold, the published figure and a verdict.

    \b
    LOGFILE is what the setup itself printed: Alpa's benchmark_gpt.py output or its
    megatron_results_e2e.tsv, Megatron's or Megatron-DeepSpeed's training log, metaseq's
    opt-baselines output, MegatronApp's trace_pipeline_*.txt, or a Slurm output file
    (%x-%j.out; srun -l labels are removed).
    The run must have completed (its planned iterations or updates, its end-of-training line,
    no non-finite loss, NaN iterations or error lines) to pass, whatever its throughput.
    Exit 0: PASS; 1: FAIL (below the threshold, or the run did not complete); 2: the metric is
    not in the file; 5: NOT JUDGED (completed, the recipe sets no threshold).

    \b
    Example:  envbuild parse opt-175b-azure train.log
              envbuild parse megatron-deepspeed-slurm megatron_ds_snmg-4242.out --json
    """
    from envbuild.cli.recipes_cmd import load_recipe_arg

    rec = load_recipe_arg(recipe)
    try:
        text = logfile.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"cannot read {logfile}: {exc.strerror or exc}",
                         hint="give the benchmark's output file") from None
    result = parse_log(rec, text, warmup, gpu)
    result["logfile"] = str(logfile)
    if as_json:
        emit_json(result)
    else:
        unit = f" {result['unit']}" if result["unit"] else ""
        click.echo(f"{rec.name}: {result['metric']} = {_fmt(result['value'])}{unit} ({result['parser']} parser, {logfile})")
        if result["threshold"] is None:
            click.echo("threshold: none")
        else:
            rel = ">=" if result["higher_is_better"] else "<="
            src = f" ({result['threshold_source']})" if result["threshold_source"] else ""
            click.echo(f"threshold: {rel} {_fmt(result['threshold'])}{unit}{src}")
        pub = result["published"]
        if pub is None:
            click.echo("published: none")
        else:
            pct = (f", measured = {pub['percent']:.1f} % of it ({pub['why']})" if pub["percent"] is not None
                   else f"; not compared: {pub['why']}")
            click.echo(f"published: {_fmt(pub['value'])}{unit} ({pub['source']}){pct}")
        done = result["completion"] or {}
        if done:
            click.echo(f"completion: {done['state']}: {done['detail']}")
        click.echo(f"verdict: {result['verdict']}: {result['reason']}")
    return EXIT[result["status"]]
