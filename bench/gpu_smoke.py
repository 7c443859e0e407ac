#!/usr/bin/env python
"""Run envbuild's GPT and all-reduce smoke benchmarks on a GPU node and record the results.

Usage (on the GPU machine, from the repository root, with the interpreter that has torch)::

    python bench/gpu_smoke.py --out bench/results/h100-smoke.json
    python bench/gpu_smoke.py --configs compile-b16,compile-b32 --out /tmp/r.json

Each configuration of ``envbuild/smoke/gpt.py`` runs in its own process (clean GPU memory,
its own compile), with a time limit; results are written after every run, so a partial
sweep still leaves a file. The file holds nvidia-smi's view of the card, every run's JSON,
the collective check, and the best run by MFU. A table is printed last.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPT = os.path.join(ROOT, "envbuild", "smoke", "gpt.py")
COLLECTIVE = os.path.join(ROOT, "envbuild", "smoke", "collective.py")

# name -> extra flags for gpt.py (all: --preset 350m --dtype bf16)
CONFIGS = {
    "compile-b16": ["--compile", "on", "--batch", "16"],
    "eager-b16": ["--compile", "off", "--batch", "16", "--steps", "10"],
    "compile-b32": ["--compile", "on", "--batch", "32"],
    "compile-b8-s2048": ["--compile", "on", "--batch", "8", "--seq", "2048"],
    "compile-b16-bf16w": ["--compile", "on", "--batch", "16", "--params", "low"],
}


def sh(cmd, timeout=60):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=timeout)
        return p.returncode, p.stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def write(path, record):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(record, fh, indent=2, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, path)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--timeout", type=int, default=150, help="seconds per configuration")
    p.add_argument("--log-dir", help="write each run's full output here")
    args = p.parse_args(argv)

    record = {
        "schema": "envbuild.bench.gpu_smoke/1",
        "recorded_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "python bench/gpu_smoke.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "nvidia_smi": sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,power.limit,"
                          "clocks.max.sm,temperature.gpu", "--format=csv"])[1].strip(),
        "runs": {},
    }
    for name in args.configs.split(","):
        flags = CONFIGS[name]
        cmd = [args.python, GPT, "--preset", "350m", "--dtype", "bf16", "--json"] + flags
        t0 = time.time()
        rc, out = sh(cmd, timeout=args.timeout)
        if args.log_dir:
            with open(os.path.join(args.log_dir, name + ".log"), "w") as fh:
                fh.write(out)
        res = last_json(out) or {"ok": False, "error": "no JSON (rc %d): %s" % (rc, out[-400:])}
        res["wall_s"] = round(time.time() - t0, 1)
        res["flags"] = flags
        record["runs"][name] = res
        write(args.out, record)
        print("done %s rc=%s in %.0fs" % (name, rc, res["wall_s"]), flush=True)

    rc, out = sh([args.python, COLLECTIVE, "--json"], timeout=120)
    record["collective"] = last_json(out) or {"ok": False, "error": out[-400:]}
    good = {k: v for k, v in record["runs"].items() if v.get("mfu")}
    if good:
        best = max(good, key=lambda k: good[k]["mfu"])
        record["best"] = {"config": best, "tokens_per_s": good[best]["tokens_per_s"],
                          "tflops": good[best]["tflops"], "peak_tflops": good[best]["peak_tflops"],
                          "mfu": good[best]["mfu"]}
    write(args.out, record)

    print("\n%-20s %10s %9s %9s %7s %8s %s" % ("config", "tokens/s", "TFLOP/s", "peak", "MFU", "mem GiB", "loss"))
    for name, r in record["runs"].items():
        if "mfu" in r:
            print("%-20s %10.0f %9.1f %9.1f %6.1f%% %8.1f %.3f->%.3f %s" % (
                name, r["tokens_per_s"], r["tflops"], r["peak_tflops"], 100 * r["mfu"],
                r.get("max_memory_gib") or 0, r["loss"]["first"], r["loss"]["last"],
                "; ".join(r.get("warnings", []))[:80]))
        else:
            print("%-20s failed: %s" % (name, str(r.get("error"))[:200]))
    c = record["collective"]
    if c.get("results"):
        print("all-reduce %s x%d: max algbw %.1f GB/s busbw %.1f GB/s, sums %s" % (
            c["backend"], c["world_size"], c["max_algbw_gbps"], c["max_busbw_gbps"],
            "right" if c["ok"] else "WRONG"))
    else:
        print("collective failed: %s" % c.get("error"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
