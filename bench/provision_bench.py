"""Provision bench: the reference recipe on 1 and 3 chroot nodes, cold and with nothing to do.

    python bench/provision_bench.py [--recipe NAME_OR_PATH] [--wheelhouse /opt/wheels]

Prints a table and writes bench/results/provision.json. Goals: a no-op provision within 5 s;
3 nodes within 1.5x the time of one. Wall times include facts, preflight and ansible; the
ansible-only time of each run is reported beside it (from the node results).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envbuild.fsio import write_atomic  # noqa: E402
from envbuild.testbed import chroot  # noqa: E402

OUT = Path(__file__).parent / "results" / "provision.json"


def run(home: Path, cluster, recipe: str, wheelhouse: str, lock: Path | None) -> dict:
    argv = [sys.executable, "-m", "envbuild", "provision", "--target", "local", "--recipe", recipe,
            "--hosts", cluster.hosts, "--identity", str(cluster.key), "--insecure",
            "--prefix", "/opt/envs/bench", "--wheelhouse", wheelhouse, "--no-smoke", "--json"]
    if lock and lock.exists():
        argv += ["--lock", str(lock)]
    t = time.time()
    p = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "ENVBUILD_HOME": str(home)})
    wall = time.time() - t
    lines = p.stdout.splitlines()  # JSON Lines: events, then {"type": "result", ...}
    if not lines or '"type": "result"' not in lines[-1]:
        raise SystemExit(f"provision printed no result (rc {p.returncode}): {p.stderr[-800:]}")
    out = json.loads(lines[-1])
    run_dir = Path(out["run_dir"])
    if lock and not lock.exists() and (run_dir / "lock.lock").exists():
        lock.write_text((run_dir / "lock.lock").read_text())
    return {"rc": p.returncode, "wall_s": round(wall, 2),
            "ansible_s": max(r["duration_s"] for r in out["results"].values()),
            "changed": sum(len(r["changed"]) for r in out["results"].values())}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--recipe", default=None, help="default: the embedded default recipe")
    ap.add_argument("--wheelhouse", default="/opt/wheels")
    a = ap.parse_args()
    why = chroot.why_unavailable()
    if why:
        sys.exit(f"cannot bench: {why}")
    recipe = a.recipe
    if recipe is None:
        from envbuild.recipes import default_recipe

        recipe = default_recipe().name
    rows = []
    with tempfile.TemporaryDirectory(prefix="eb-bench-") as tmp:
        base = Path(tmp)
        (base / "pip").mkdir()
        lock = base / "bench.lock"
        binds = [(a.wheelhouse, a.wheelhouse, True), (base / "pip", "/root/.cache/pip", False)]
        for n in (1, 3):
            cluster = chroot.ChrootCluster(base / f"n{n}", n, binds=binds, base=120 + 10 * n, prefix=f"b{n}-")
            with cluster:
                for phase in ("cold", "no-op"):
                    r = run(base / "home", cluster, recipe, a.wheelhouse, lock)
                    rows.append({"nodes": n, "phase": phase, **r})
                    print(f"{n} node(s) {phase:<6} rc={r['rc']} wall {r['wall_s']:7.2f} s  "
                          f"ansible {r['ansible_s']:7.2f} s  steps changed {r['changed']}", flush=True)
    cold = {r["nodes"]: r["wall_s"] for r in rows if r["phase"] == "cold"}
    noop = [r for r in rows if r["phase"] == "no-op"]
    summary = {"three_vs_one_cold": round(cold[3] / cold[1], 2),
               "noop_wall_max_s": max(r["wall_s"] for r in noop),
               "noop_ansible_max_s": max(r["ansible_s"] for r in noop)}
    summary["goal_noop_5s"] = summary["noop_wall_max_s"] <= 5
    summary["goal_3_nodes_1_5x"] = summary["three_vs_one_cold"] <= 1.5
    write_atomic(OUT, json.dumps({"recipe": recipe, "rows": rows, "summary": summary,
                                  "cpu_count": os.cpu_count()}, indent=2) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
