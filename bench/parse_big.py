"""Parse bench (issue 54): ``envbuild parse`` of a big log and of lines shaped against the log
readers' patterns, each in its own process, with its wall time and peak memory.

    python bench/parse_big.py [--size-mb 1024] [--line-kb 50,200] [--max-log-mib N]
                              [--dir /tmp/envbuild-parse-bench] [--out bench/results/parse-big.json]

Files written (in ``--dir``, removed afterwards unless ``--keep``):

* ``big.log``: a Megatron-DeepSpeed run of ``--size-mb`` MiB under ``srun -l``, made of the lines of
  tests/data/native_logs/corpus/megatron-deepspeed-slurm/completed.log (the job script's trace, the
  arguments block, then per iteration DeepSpeed's ``step=`` and ``steps:`` lines and Megatron's
  iteration line, ``train_iters`` set to the count written), judged for megatron-deepspeed-slurm;
* one file per shape and ``--line-kb`` size: the corpus's completed log with one line of that many
  KiB added after the arguments block, shaped against ``ARG_RE`` (``name .. x`` and spaces),
  ``FIELD_RE`` (a field name of spaces in an iteration line), ``ALPA_PRINTED_RE``
  (``method: x value: {}`` repeated; judged for alpa-megatron-h100) and the declared rules' own
  line handling.

For each file: ``envbuild parse RECIPE FILE --json`` (a fresh interpreter), its exit status, the
verdict and metric it printed, its wall and CPU time and its peak resident memory (``wait4``'s
``ru_maxrss``); printed as a table and written to ``--out`` when given. The adversarial files
must give the verdict of the completed log they were made from. The big log is parsed under the
default bound on the text a log may hold (``envbuild.smoke.logread``: a log past it is refused,
exit 2, without being read whole), and again with ``ENVBUILD_MAX_LOG_MIB=N`` when
``--max-log-mib N`` is given (N above the log's size: judged whole).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "tests/data/native_logs/corpus/megatron-deepspeed-slurm/completed.log"
ALPA_TEMPLATE = ROOT / "tests/data/native_logs/corpus/alpa-megatron-h100/completed.log"
MDS = "megatron-deepspeed-slurm"
ALPA = "alpa-megatron-h100"
GPU = "NVIDIA A100-SXM4-80GB"


def _parts(template: str) -> tuple[list[str], list[str], list[str]]:
    """(the lines before the first iteration's lines, one iteration's lines, the lines after the last)."""
    lines = template.splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if "step=1," in line)
    second = next(i for i, line in enumerate(lines) if "step=2," in line)
    last = max(i for i, line in enumerate(lines) if " iteration " in line and "|" in line)
    return lines[:first], lines[second:second + 3], lines[last + 1:]


def write_big(path: Path, size: int) -> int:
    """A completed run of as many iterations as fill ``size`` bytes; the count written."""
    head, one, tail = _parts(TEMPLATE.read_text())
    per = sum(len(line) for line in one) + 16
    count = max(2, (size - sum(map(len, head)) - sum(map(len, tail))) // per)
    dots = "train_iters " + "." * 37
    head = [line.replace("--train-iters 20", f"--train-iters {count}").replace(f"{dots} 20", f"{dots} {count}")
            for line in head]
    with path.open("w") as out:
        out.writelines(head)
        chunk = []
        for i in range(1, count + 1):
            for line in one:
                line = re.sub(r"step=2,", f"step={i},", line)
                line = re.sub(r"steps: 2 ", f"steps: {i} ", line)
                line = re.sub(r"iteration +2/ +20 \|", f"iteration {i:8d}/{count:8d} |", line)
                chunk.append(line)
            if len(chunk) > 30000:
                out.writelines(chunk)
                chunk = []
        out.writelines(chunk)
        out.writelines(tail)
    return count


def adversarial(kb: int) -> dict[str, tuple[str, str]]:
    """{name: (recipe, file text)}: a completed log with one line of ``kb`` KiB against a pattern."""
    n = kb * 1024
    text = TEMPLATE.read_text()
    cut = text.index("0: -------------------- end of arguments")  # where a line is added
    end = text.index(" |\n", text.index("iteration        1/")) + 2  # the end of the first iteration line
    alpa = ALPA_TEMPLATE.read_text()
    return {
        "ARG_RE": (MDS, text[:cut] + "0:   a .. x" + " " * n + "y\n" + text[cut:]),
        "FIELD_RE": (MDS, text[:end] + " a" + " " * n + "! |" + text[end:]),  # a field name of spaces
        "ALPA_PRINTED_RE": (ALPA, alpa + "method: x value: {} " * (n // 20) + "\n"),
        "long-line": (MDS, text[:cut] + "0: " + "x" * n + "\n" + text[cut:]),
    }


def run(recipe: str, path: Path, max_log_mib: int | None = None) -> dict:
    """``envbuild parse`` of ``path`` in a fresh process: exit status, verdict, wall time, peak RSS."""
    argv = [sys.executable, "-m", "envbuild", "parse", recipe, str(path), "--json", "--gpu", GPU]
    env = {**os.environ, **({"ENVBUILD_MAX_LOG_MIB": str(max_log_mib)} if max_log_mib else {})}
    t0 = time.monotonic()
    with open(path.with_suffix(".json"), "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, cwd=ROOT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    try:
        data = json.loads(path.with_suffix(".json").read_text())
    except ValueError:
        data = {}
    return {"file": path.name, "bytes": path.stat().st_size, "recipe": recipe, "rc": os.waitstatus_to_exitcode(status),
            "verdict": data.get("verdict"), "value": data.get("value"), "seconds": round(wall, 2),
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1), "stderr": err.strip()[-300:]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024, help="the big log's size in MiB (default 1024)")
    ap.add_argument("--line-kb", default="50,200", help="the adversarial lines' sizes in KiB")
    ap.add_argument("--max-log-mib", type=int, default=None,
                    help="parse the big log again with ENVBUILD_MAX_LOG_MIB set to this")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/envbuild-parse-bench"))
    ap.add_argument("--out", type=Path, help="write the rows as JSON here")
    ap.add_argument("--keep", action="store_true", help="keep the generated files")
    args = ap.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    args.dir.mkdir(parents=True)
    rows = []
    try:
        for kb in (int(k) for k in args.line_kb.split(",") if k):
            for name, (recipe, text) in adversarial(kb).items():
                path = args.dir / f"{name}-{kb}k.log"
                path.write_text(text)
                rows.append({"case": f"{name} {kb} KiB line", **run(recipe, path)})
                print(json.dumps(rows[-1]), flush=True)
        big = args.dir / "big.log"
        t0 = time.monotonic()
        count = write_big(big, args.size_mb * 1024 * 1024)
        print(f"# wrote {big} ({big.stat().st_size} bytes, {count} iterations) in {time.monotonic() - t0:.1f} s",
              flush=True)
        rows.append({"case": f"{args.size_mb} MiB log, {count} iterations", **run(MDS, big)})
        print(json.dumps(rows[-1]), flush=True)
        if args.max_log_mib:
            rows.append({"case": f"{args.size_mb} MiB log, bound {args.max_log_mib} MiB",
                         **run(MDS, big, args.max_log_mib)})
            print(json.dumps(rows[-1]), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(args.dir, ignore_errors=True)
    print(f"\n{'case':40} {'MiB':>8} {'rc':>3} {'verdict':>10} {'wall s':>8} {'CPU s':>8} {'peak RSS MiB':>13}")
    for r in rows:
        print(f"{r['case']:40} {r['bytes'] / 2**20:8.1f} {r['rc']:3d} {str(r['verdict']):>10} {r['seconds']:8.2f} "
              f"{r['cpu_seconds']:8.2f} {r['peak_rss_mib']:13.1f}")
    if args.out:
        args.out.write_text(json.dumps({"machine": platform.node(), "python": platform.python_version(),
                                        "cpus": os.cpu_count(), "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
