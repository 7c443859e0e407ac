"""``envbuild smoke``: run the built-in smoke benchmarks with an environment's interpreter."""

from __future__ import annotations

import click

from envbuild.cli import cli
from envbuild.cli.output import console, emit_json
from envbuild.flows.smoke import KINDS, PRESETS


def _spread(r: dict, key: str, fmt: str) -> str:
    """`` (median of N: MIN-MAX)`` for a repeated number, else ''."""
    values = ((r.get("repeat") or {}).get("values") or {}).get(key) or []
    if len(values) < 2:
        return ""
    return f" (median of {len(values)}: {min(values):{fmt}}-{max(values):{fmt}})"


def _summary(kind: str, r: dict) -> str:
    if r.get("error"):
        return r["error"]
    if kind == "gpt":
        return (f"{r['device_name']} {r['dtype']}: {r['tokens_per_s']:.0f} tokens/s{_spread(r, 'tokens_per_s', '.0f')}, "
                f"{r['tflops']:.3g} TFLOP/s of {r['peak_tflops']:.3g} measured peak, "
                f"MFU {100 * r['mfu']:.1f}%, loss {r['loss']['first']:.3f} -> {r['loss']['last']:.3f}")
    if kind == "collective":
        return (f"all-reduce {r['backend']} x{r['world_size']}: max algbw {r['max_algbw_gbps']:.2f} GB/s, "
                f"busbw {r['max_busbw_gbps']:.2f} GB/s{_spread(r, 'max_busbw_gbps', '.2f')}, "
                f"sums {'right' if r['ok'] else 'WRONG'}")
    return str(r.get("reason") or r.get("status", "?"))


@cli.command("smoke")
@click.option("--local", is_flag=True, help="Run on this machine (remote nodes: envbuild provision).")
@click.option("--python", "python", metavar="PATH", help="The environment's interpreter [this one].")
@click.option("--preset", type=click.Choice(PRESETS), default="tiny", show_default=True,
              help="tiny: CPU, seconds; 350m: a ~355M GPT on the GPU (MFU).")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(KINDS),
              help="Which smoke scripts to run (repeatable) [gpt, collective].")
@click.option("--repeat", type=click.IntRange(1, 100), default=1, show_default=True,
              help="Run gpt and collective N times: each number is the median, with min and max.")
@click.option("-o", "--output", "--out", "out", type=click.Path(dir_okay=False),
              help="Write the results (smoke.json) here (--out: the old spelling).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def smoke_cmd(local: bool, python: str | None, preset: str, kinds: tuple[str, ...], repeat: int, out: str | None,
              as_json: bool) -> None:
    """Run the GPT training-step benchmark (tokens/s, TFLOP/s, MFU against a matmul peak
    measured in the same run) and the all-reduce check with a given interpreter.

    \b
    Examples:
      envbuild smoke --local --preset tiny
      envbuild smoke --local --python /opt/env/bin/python --preset 350m --json
      envbuild smoke --local --kind apex --json
      envbuild smoke --local --repeat 5 -o smoke.json      # median, min, max of 5 runs
    A result written with -o into a run's nodes/<host>/smoke.json is what `envbuild report`
    shows for that node (with the spread of repeated runs).
    Exit 1 when a smoke result is not ok; 3 when the interpreter has no torch.
    """
    from envbuild.flows.smoke import SmokeRequest, smoke

    res = smoke(SmokeRequest(local=local, python=python, preset=preset, kinds=kinds, repeat=repeat, out=out))
    if as_json:
        emit_json(res.results)
    else:
        for kind, r in res.results.items():
            mark = "[green]ok[/]" if r.get("ok") else "[red]FAIL[/]"
            console.print(f"{kind:11} {mark}  {_summary(kind, r)}")
    failure = res.failure()
    if failure is not None:
        raise failure
