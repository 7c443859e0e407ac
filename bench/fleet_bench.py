"""Fleet bench: cpu-reference onto 1, 3 and 8 loopback sshd nodes, cold and with nothing to do.

    python bench/fleet_bench.py [--nodes 1,3,8] [--repeat 3] [--wheelhouse /opt/wheels]
                                [--root /tmp/envbuild-fleet-bench]

For each N: N sshd nodes (``envbuild.testbed.sshd``, host keys checked), a fresh
``$ENVBUILD_HOME`` and a fresh download cache (``$ENVBUILD_CACHE_DIR``), each node its own
environment (``--prefix ROOT/N/envs/{node}``: the nodes share this machine's filesystem).

* cold: ``envbuild provision cpu-reference --push-wheels`` (the fleet path for every N, one
  node included, so that the bytes are counted the same way): every wheel is fetched once on
  the controller, pushed, installed --no-index on the nodes (they take nothing from an index).
  Bytes from the index are measured twice: run.json's ``fleet.downloaded_bytes`` (what the
  controller downloaded, file by file) and the growth of the download cache on disk (du of
  ``$ENVBUILD_CACHE_DIR``). torch comes from the wheelhouse (not an index; counted apart).
* no-op: the same command --repeat times with nothing to do (wall time of the whole command).

Goals (issue 10): cold on 8 nodes within 2x one node; bytes from the index independent of N;
a no-op on 8 nodes within 2 s. Each row records the 1-minute load average before and after
(a shared 2-core machine stretches wall times). Writes bench/results/fleet.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envbuild.fsio import write_atomic  # noqa: E402
from envbuild.record import read_run_info  # noqa: E402
from envbuild.record.run import FleetRecord  # noqa: E402
from envbuild.testbed import uvcache  # noqa: E402

OUT = Path(__file__).parent / "results" / "fleet.json"


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def provision(bed, root: Path, wheelhouse: str) -> dict:
    argv = [sys.executable, "-m", "envbuild", "provision", "cpu-reference", "--target", "local",
            "--inventory", str(bed.inventory_path), "--prefix", f"{root}/envs/{{node}}",
            "--wheelhouse", wheelhouse, "--no-smoke", "--push-wheels", "--json"]
    env = {**os.environ, **bed.env, "ENVBUILD_HOME": str(root / "home"), "ENVBUILD_CACHE_DIR": str(root / "cache")}
    before, load0 = du(root / "cache"), os.getloadavg()[0]
    t = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    lines = p.stdout.splitlines()
    if not lines or '"type": "result"' not in lines[-1]:
        raise SystemExit(f"provision printed no result (rc {p.returncode}): {p.stderr[-1500:]}")
    out = json.loads(lines[-1])
    run = read_run_info(Path(out["run_dir"]))
    fleet = run.fleet or FleetRecord(pushed=False, nodes=0)
    return {"rc": p.returncode, "wall_s": round(wall, 3), "verdict": run.verdict,
            "ansible": run.ansible or "started",
            "statuses": sorted({r["status"] for r in out["results"].values()}),
            "changed_steps": sum(len(r["changed"]) for r in out["results"].values()),
            "index_bytes_run_json": fleet.downloaded_bytes,
            "index_bytes_cache_growth": du(root / "cache") - before,
            "wheelhouse_bytes": fleet.wheelhouse_bytes, "pushed_files": fleet.files,
            "pushed_bytes_per_node": fleet.bytes,
            "loadavg_1min": [round(load0, 2), round(os.getloadavg()[0], 2)]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", default="1,3,8")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--wheelhouse", default="/opt/wheels")
    ap.add_argument("--root", default="/tmp/envbuild-fleet-bench")
    a = ap.parse_args()
    rows = []
    for n in [int(x) for x in a.nodes.split(",")]:
        root = Path(a.root) / str(n)
        shutil.rmtree(root, ignore_errors=True)  # cold: no environment, no cache, no runs
        root.mkdir(parents=True)
        with uvcache.loopback_fleet(root, n, 100) as bed:  # the fleet's own uv cache, removed with envs
            cold = provision(bed, root, a.wheelhouse)
            print(f"{n} node(s) cold  rc={cold['rc']} {cold['wall_s']:8.2f} s  index bytes "
                  f"{cold['index_bytes_run_json']} (cache growth {cold['index_bytes_cache_growth']})", flush=True)
            noops = [provision(bed, root, a.wheelhouse) for _ in range(a.repeat)]
            walls = [r["wall_s"] for r in noops]
            print(f"{n} node(s) no-op {walls} s (median {statistics.median(walls):.2f})", flush=True)
        rows.append({"nodes": n, "cold": cold, "noop": noops, "noop_median_s": statistics.median(walls),
                     "noop_all_ok": all(r["rc"] == 5 and r["changed_steps"] == 0 for r in noops)})
    by = {r["nodes"]: r for r in rows}
    summary: dict = {}
    if 1 in by and 8 in by:
        summary["cold_8_vs_1"] = round(by[8]["cold"]["wall_s"] / by[1]["cold"]["wall_s"], 2)
        summary["goal_cold_8_within_2x"] = summary["cold_8_vs_1"] <= 2.0
    if 8 in by:
        summary["noop_8_median_s"] = by[8]["noop_median_s"]
        summary["goal_noop_8_within_2s"] = by[8]["noop_median_s"] <= 2.0
    index_bytes = {n: r["cold"]["index_bytes_run_json"] for n, r in by.items()}
    summary["index_bytes_by_nodes"] = index_bytes
    summary["index_bytes_independent_of_n"] = len(set(index_bytes.values())) == 1 and all(
        r["cold"]["index_bytes_run_json"] == r["cold"]["index_bytes_cache_growth"] for r in rows)
    write_atomic(OUT, json.dumps({
        "what": "cpu-reference onto N loopback sshd nodes: cold provision (wheels once on the controller, "
                "pushed) and no-op provision; wall time of the whole `envbuild provision` command",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "rows": rows, "summary": summary}, indent=2) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
