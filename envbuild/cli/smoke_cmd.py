"""``envbuild smoke``: run the built-in smoke benchmarks with an environment's interpreter."""

from __future__ import annotations

import os
import shutil
import sys

import click

from envbuild.cli import cli
from envbuild.cli.output import console, emit_json
from envbuild.errors import CheckFailed, EnvironmentProblem, InputError
from envbuild.fsio import write_atomic
from envbuild.smoke import KINDS, PRESETS, local_runner, run_smoke


def _resolve_python(python: str | None) -> str:
    if python is None:
        return sys.executable
    found = shutil.which(python) if os.sep not in python else (python if os.access(python, os.X_OK) else None)
    if not found or not os.path.isfile(found):
        raise InputError(f"python interpreter {python!r} not found or not executable",
                         hint="give the environment's interpreter, e.g. --python /opt/env/bin/python")
    return found


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
    if not local:
        raise InputError("envbuild smoke runs here only with --local",
                         hint="pass --local, or run the smoke on nodes with `envbuild provision`")
    interp = _resolve_python(python)
    results = run_smoke(interp, list(kinds) or ["gpt", "collective"], preset, local_runner, repeat=repeat)
    no_torch = [k for k, r in results.items() if "No module named 'torch'" in str(r.get("error", ""))]
    if no_torch:
        raise EnvironmentProblem(f"{interp} has no torch, so the smoke scripts cannot run",
                                 hint=f"install torch into that environment ({interp} -m pip install torch)")
    if out:
        import json
        write_atomic(out, json.dumps(results, indent=2, sort_keys=True) + "\n")
    if as_json:
        emit_json(results)
    else:
        for kind, r in results.items():
            mark = "[green]ok[/]" if r.get("ok") else "[red]FAIL[/]"
            console.print(f"{kind:11} {mark}  {_summary(kind, r)}")
    bad = [k for k, r in results.items() if not r.get("ok")]
    if bad:
        raise CheckFailed(f"smoke not ok: {', '.join(bad)}",
                          hint="rerun with --json to see each script's full result")
