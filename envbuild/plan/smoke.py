"""The runs of a plan's smoke step, planned from the recipe and the node's facts. Pure.

The plan's ``smoke`` step says which of envbuild's scripts run (``kinds``) with which
``preset``; this module turns that, the recipe's ``benchmark`` and the node's GPUs into the runs
a node (or an image's containers) executes: ``[{name, script, argv, cwd, env, timeout}]``. The
recipe's own benchmark is a run when the node can run it; otherwise ``native_run`` says why not.
Reading the runs' outputs back is ``envbuild.smoke.onnode``'s (the judge side).

Example::

    >>> runs = node_runs("/opt/env", {"kinds": ["gpt", "collective"], "preset": "tiny"})
    >>> [r["name"] for r in runs], runs[1]["argv"][2:]
    (['gpt', 'collective'], ['--json', '--device', 'cpu', '--nproc', '2'])
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING

from envbuild.plan.capture import capture

if TYPE_CHECKING:
    from envbuild.recipes.schema import RunOutput

#: kind -> envbuild's smoke script, copied to the node's smoke folder (envbuild/smoke/<name>)
SCRIPT_NAMES: dict[str, str] = {"gpt": "gpt.py", "collective": "collective.py", "apex": "apex_check.py"}
SMOKE_TIMEOUT_S = 1800
NATIVE_TIMEOUT_S = 3600
GRACE_S = 60  # a benchmark's timeout_s: from SIGTERM to SIGKILL
FROM_SMOKE = "envbuild-smoke"  # the parser whose benchmark is envbuild's own gpt smoke
PLACEHOLDER = re.compile(r"\{sources\.([A-Za-z0-9_.-]+)\}")


def smoke_dir(prefix: str) -> str:
    """Where the scripts and their outputs lie on the node."""
    return f"{prefix.rstrip('/')}/.envbuild/smoke"


def smoke_argv(python: str, kind: str, preset: str, script_dir: str, *, require: bool = False,
               gpus: int | None = None) -> list[str]:
    """The argv that runs one smoke script lying in ``script_dir``.

    Each script has its own flags: only gpt takes ``--preset``; apex with ``require`` (the
    recipe builds Apex) fails when Apex is absent. ``gpus`` is what the smoke may use of the
    node (``smoke_gpus``): with GPUs, gpt trains on one of them (``--device cuda``) and
    collective is an NCCL all-reduce with one rank per GPU (its sweep: 1 MiB to 1 GiB). Which
    of the node's GPUs is left to the node at run time: the plan passes the facts' count
    (``--node-gpus``, nvidia-smi's, which ignores ``CUDA_VISIBLE_DEVICES``) and the script spawns
    a rank for each of them its process sees (``CUDA_VISIBLE_DEVICES=2,3``: 2 ranks); with
    none, collective is two CPU ranks (gloo) and gpt runs where its preset says. ``None`` (not
    known: ``envbuild smoke --local``) leaves it to the scripts, except that the tiny preset's
    collective stays on the CPU, as the preset is.

    >>> smoke_argv("py", "collective", "tiny", "/e/.envbuild/smoke")
    ['py', '/e/.envbuild/smoke/collective.py', '--json', '--device', 'cpu', '--nproc', '2']
    >>> smoke_argv("py", "collective", "tiny", "/e/.envbuild/smoke", gpus=2)[3:]
    ['--device', 'cuda', '--node-gpus', '2']
    >>> smoke_argv("py", "gpt", "tiny", "/e/.envbuild/smoke", gpus=2)[3:]
    ['--preset', 'tiny', '--device', 'cuda']
    """
    argv = [python, f"{script_dir.rstrip('/')}/{SCRIPT_NAMES[kind]}", "--json"]
    if kind == "gpt":
        argv += ["--preset", preset] + (["--device", "cuda"] if gpus else [])
    elif kind == "collective" and gpus:
        argv += ["--device", "cuda", "--node-gpus", str(gpus)]
    elif kind == "collective" and (gpus == 0 or preset == "tiny"):
        argv += ["--device", "cpu", "--nproc", "2"]
    elif kind == "apex" and require:
        argv += ["--require"]
    return argv


def smoke_gpus(gpus: int, torch_variant: str | None) -> int:
    """The GPUs the smoke uses: all of the node's, unless the plan's torch is a CPU build
    (``torch_variant``: the plan's ``torch-variant`` decision, e.g. ``cpu``, ``cu121``; None
    when torch comes from the node, an image or a module), which cannot use them.

    >>> smoke_gpus(2, "cu121"), smoke_gpus(2, None), smoke_gpus(2, "cpu"), smoke_gpus(0, "cu121")
    (2, 2, 0, 0)
    """
    return 0 if torch_variant == "cpu" else max(0, gpus)


def torch_variant(decisions) -> str | None:
    """The outcome of a plan's ``torch-variant`` decision (``cpu``, ``cu121``...), None without one."""
    return next((d.outcome for d in decisions if d.subject == "torch-variant"), None)


def node_runs(prefix: str, params: dict, benchmark: dict | None = None, *, gpus: int = 0,
              sources: dict[str, str] | None = None, output: RunOutput | None = None,
              torch: str | None = None) -> list[dict]:
    """The runs of one node's smoke step: ``[{name, script, argv, cwd, env, timeout}]``.

    ``params`` are the plan step's (``kinds``, ``preset``); the scripts run with the
    environment's python, each with its own flags (``smoke_argv``), on the node's ``gpus``
    unless the plan's ``torch`` variant is a CPU build (``smoke_gpus``). The recipe's native
    benchmark is appended when ``native_run`` finds it runnable here.
    """
    python = f"{prefix.rstrip('/')}/bin/python"
    where = smoke_dir(prefix)
    use = smoke_gpus(gpus, torch)
    runs = [{"name": kind, "script": SCRIPT_NAMES[kind],
             "argv": smoke_argv(python, kind, params.get("preset") or "tiny", where, require=True, gpus=use),
             "cwd": where, "env": {}, "timeout": SMOKE_TIMEOUT_S}
            for kind in params.get("kinds") or [] if kind in SCRIPT_NAMES]
    native = native_run(benchmark, gpus=gpus, sources=sources or {}, cwd=where, output=output)
    if "argv" in native:
        runs.append(native)
    return runs


def is_gpt_smoke(benchmark: dict) -> bool:
    """Whether the recipe's benchmark is envbuild's gpt smoke (``python gpt.py ...``, read with
    ``envbuild-smoke``), not a program of the recipe's own that prints the same record.

    >>> is_gpt_smoke({"command": "python gpt.py --preset tiny --json", "parser": "envbuild-smoke"})
    True
    >>> is_gpt_smoke({"command": "python tally.py --json", "parser": "envbuild-smoke"})
    False
    """
    try:
        words = shlex.split(benchmark.get("command") or "")
    except ValueError:
        return False
    return benchmark.get("parser") == FROM_SMOKE and words[1:2] == [SCRIPT_NAMES["gpt"]]


def fresh_start(folders: list[dict]) -> str:
    """The shell that removes what an earlier run of the benchmark left for the next one to
    resume from (the recipe's ``benchmark.fresh``), before the command; the paths are checked
    by the schema (inside the working directory, no option, no pattern) and quoted here.

    >>> fresh_start([{"path": "checkpoints"}])
    'rm -rf -- ./checkpoints && '
    >>> fresh_start([])
    ''
    """
    if not folders:
        return ""
    return "rm -rf -- " + " ".join(shlex.quote(f"./{f['path']}") for f in folders) + " && "


def native_run(benchmark: dict | None, *, gpus: int, sources: dict[str, str], cwd: str,
               output: RunOutput | None = None) -> dict:
    """The recipe's own benchmark as a run, or ``{"skip": reason}`` when it cannot run here.

    A benchmark that runs envbuild's gpt smoke itself (parsed with ``envbuild-smoke``, its
    program ``gpt.py``) is measured by the smoke step's gpt run: nothing more to run. A recipe's
    own program that prints the same record (a user's benchmark) runs like any other.
    Others run when the node has the GPUs they need and every ``{sources.<name>}`` they name
    is a checkout of this plan. The command runs in the foreground with its training output on
    stdout, taken where the recipe's run says it is (``output``: a trace file, a backgrounded job;
    ``envbuild.plan.capture``). Folders an earlier run left for this one to resume from
    (``fresh``) are removed first (``fresh_start``).
    """
    if not benchmark or not benchmark.get("command"):
        return {"skip": "the recipe has no benchmark"}
    if is_gpt_smoke(benchmark):
        return {"skip": "measured by the gpt smoke"}
    need = int(benchmark.get("needs_gpus") or 0)
    if gpus < need:
        return {"skip": f"needs {need} GPUs, the node has {gpus}"}
    texts = [benchmark["command"], benchmark.get("cwd") or "", *(benchmark.get("env") or {}).values()]
    missing = sorted({m for t in texts for m in PLACEHOLDER.findall(t) if m not in sources})
    if missing:
        return {"skip": f"source checkout not in the plan: {', '.join(missing)}"}

    def fill(text: str) -> str:
        return PLACEHOLDER.sub(lambda m: sources[m.group(1)], text)

    command, bound = fill(benchmark["command"]), benchmark.get("timeout_s")
    if bound and not (output and output.backgrounds):
        # inside the capture, so the output written before the bound is still printed after it
        # (the step's own bound kills the whole shell); GNU timeout signals its process group
        # (the launcher and its workers), SIGKILL after a grace of GRACE_S
        command = f"timeout -k {GRACE_S} {int(bound)} bash -c {shlex.quote(command)}"
    return {"name": "native", "script": None,
            "argv": ["bash", "-c", fresh_start(benchmark.get("fresh") or []) + capture(output, command)],
            "cwd": fill(benchmark.get("cwd") or cwd),
            "env": {k: fill(str(v)) for k, v in (benchmark.get("env") or {}).items()},
            "timeout": int(bound) + 2 * GRACE_S if bound else NATIVE_TIMEOUT_S}
