"""Slurm bench: the time from sbatch to a parsed result on the test cluster.

    python bench/slurm_bench.py [--repeat 3] [--out bench/results/slurm.json]

Starts the Slurm testbed (envbuild.testbed.slurm: munged, slurmctld and 2 slurmd in network
namespaces, 2 fake GPUs per node), builds a stand-in environment for megatron-deepspeed-slurm's
plan (envbuild.testbed.planenv: a venv seeing this interpreter's CPU torch, the plan's env file
and smoke scripts) and launches through envbuild.launch.submit, each scenario ``--repeat``
times. Each sample splits sbatch -> parsed into: sbatch returning (submit), the job's terminal
state seen by ``scontrol show job`` (run: queueing, the job, and the poll interval), reading
its output files (collect) and parsing them with the recipe's parser (parse).

Scenarios (the training command is replaced in all of them, as the script says; no GPUs here):
  replay     1 node: ``cat`` of a captured Megatron-DeepSpeed log, parsed with megatron-deepspeed
  smoke-1    1 node x 1 rank: envbuild's CPU smoke through torchrun (c10d), the scheduler's
             overhead plus a torch start
  smoke-2    2 nodes x 1 rank: the same across nodes, rendezvous on node1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envbuild.facts.profile import from_target  # noqa: E402
from envbuild.fsio import write_atomic  # noqa: E402
from envbuild.launch import LaunchOptions  # noqa: E402
from envbuild.launch import submit as sub  # noqa: E402
from envbuild.plan.build import PlanOptions  # noqa: E402
from envbuild.plan.resolve import resolve  # noqa: E402
from envbuild.recipes import load_recipe  # noqa: E402
from envbuild.targets import load_target  # noqa: E402
from envbuild.testbed.planenv import materialize  # noqa: E402
from envbuild.testbed.slurm import slurm_cluster, why_unavailable  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).parent / "results" / "slurm.json"
LOG = ROOT / "tests" / "data" / "native_logs" / "megatron_deepspeed_slurm.log"
SCENARIOS = {
    "replay": dict(command_override=f"cat {LOG}", gpus_per_node=1),
    "smoke-1": dict(smoke_only=True, gpus_per_node=1),
    "smoke-2": dict(variant="multi-node", smoke_only=True, gpus_per_node=1),
}


def sample(rec, tgt, plan, cluster, kw: dict) -> dict:
    t0 = time.monotonic()
    out = sub.launch(rec, tgt, plan, LaunchOptions(scheduler="slurm", no_container=True, **kw),
                     argv=["bench/slurm_bench.py"], env=cluster.env, timeout=300)
    total = time.monotonic() - t0
    t = out.result.timings
    ok = out.result.ok and out.passed
    return {"ok": ok, "state": out.result.state, "job": out.result.job_id,
            "sbatch_to_parsed_s": round(t["submit_s"] + t["run_s"] + t["collect_s"] + t["parse_s"], 3),
            "submit_s": round(t["submit_s"], 3), "run_s": round(t["run_s"], 3),
            "collect_s": round(t["collect_s"], 4), "parse_s": round(t["parse_s"], 4),
            "launch_total_s": round(total, 3)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    why = why_unavailable()
    if why:
        sys.exit(f"cannot bench: {why}")
    with tempfile.TemporaryDirectory(prefix="envbuild-slurm-bench-") as tmp:
        os.environ["ENVBUILD_HOME"] = str(Path(tmp) / "home")
        rec, tgt = load_recipe("megatron-deepspeed-slurm"), load_target("slurm")
        plan = resolve(rec, tgt, from_target(tgt), None, PlanOptions(prefix=f"{tmp}/env", host="slurm")).plan
        materialize(plan, Path(tmp) / "files", rec)
        t0 = time.monotonic()
        with slurm_cluster(2, gpus_per_node=2, base_dir=tmp) as cluster:
            up = time.monotonic() - t0
            results = {}
            for name, kw in SCENARIOS.items():
                runs = [sample(rec, tgt, plan, cluster, kw) for _ in range(a.repeat)]
                med = statistics.median(r["sbatch_to_parsed_s"] for r in runs)
                results[name] = {"options": {k: v for k, v in kw.items() if k != "command_override"}
                                 | ({"command_override": "cat tests/data/native_logs/megatron_deepspeed_slurm.log"}
                                    if "command_override" in kw else {}),
                                 "median_sbatch_to_parsed_s": med, "all_ok": all(r["ok"] for r in runs),
                                 "samples": runs}
                print(f"{name:8} median sbatch->parsed {med:6.2f} s  "
                      + "  ".join(f"{r['sbatch_to_parsed_s']:.2f}" for r in runs))
            t1 = time.monotonic()
        down = time.monotonic() - t1
    doc = {"schema": "envbuild.bench.slurm/1", "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                       "loadavg_at_end": [round(x, 2) for x in os.getloadavg()]},
           "cluster": {"nodes": 2, "fake_gpus_per_node": 2, "start_s": round(up, 2), "teardown_s": round(down, 2)},
           "repeat": a.repeat, "scenarios": results}
    write_atomic(a.out, json.dumps(doc, indent=2) + "\n")
    print(f"cluster up {up:.2f} s, down {down:.2f} s; wrote {a.out}")
    return 0 if all(r["all_ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
