"""Fan-out bench (issue 38): a fleet's wheels archive to N loopback sshd nodes, from the controller
to each node (a star) or down a tree of the nodes (``provision --fanout K``).

    python bench/fanout_bench.py [--nodes 2,4] [--fanout 2] [--root /tmp/envbuild-fanout-bench]

For each N and each way: N sshd nodes (``envbuild.testbed.sshd``, host keys checked; the bed's
key, at the same path on every node since they share this machine's files, is the nodes'
``--node-identity``), a fresh ``$ENVBUILD_HOME``, each node its own environment, and one cold
``envbuild provision cpu-reference --push-wheels --no-smoke``. Counted from ansible-runner's
own job events (what ran, not what was planned): the copies of the archive the controller sent
(the tasks that copy it from the controller and finished ok), the copies nodes sent each
other (the holder's scp, ok), the archive's size, the bytes the controller sent of it; the
wall time of the command, and the load average. Loopback nodes share one disk and one
network interface, so the wall time says little of a real network's: the copies are the
figure. Writes ``bench/results/fanout.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envbuild.fsio import write_atomic  # noqa: E402
from envbuild.testbed import uvcache  # noqa: E402

OUT = Path(__file__).parent / "results" / "fanout.json"
FROM_CONTROLLER = ("Copy and unpack the archive", "Copy the archive from the controller")
NODE_TO_NODE = "Envbuild holder sends its copy to this node"


def events(run_dir: Path) -> list[dict]:
    out = []
    for path in (run_dir / "ansible" / "artifacts").rglob("job_events/*.json"):
        out.append(json.loads(path.read_text()))
    return out


def ok_count(evs: list[dict], names) -> int:
    names = (names,) if isinstance(names, str) else names
    return sum(1 for e in evs if e["event"] == "runner_on_ok" and (e.get("event_data") or {}).get("task") in names)


def run(n: int, fanout: int | None, root: Path, wheelhouse: str) -> dict:
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    with uvcache.loopback_fleet(root, n, 100) as bed:
        argv = [sys.executable, "-m", "envbuild", "provision", "cpu-reference", "--target", "local",
                "--inventory", str(bed.inventory_path), "--prefix", f"{root}/envs/{{node}}",
                "--wheelhouse", wheelhouse, "--no-smoke", "--push-wheels", "--json"]
        if fanout:
            argv += ["--fanout", str(fanout), "--node-identity", str(bed.key_path)]
        env = {**os.environ, **bed.env, "ENVBUILD_HOME": str(root / "home"), "ENVBUILD_CACHE_DIR": str(root / "cache")}
        load0, t = os.getloadavg()[0], time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t
    result = json.loads(proc.stdout.splitlines()[-1])
    run_dir = Path(result["run_dir"])
    info = json.loads((run_dir / "run.json").read_text())
    archive = Path(info["fleet"]["dir"] + ".tar")
    evs = events(run_dir)
    copies = ok_count(evs, FROM_CONTROLLER)
    return {"nodes": n, "way": f"tree, fan-out {fanout}" if fanout else "star", "rc": proc.returncode,
            "statuses": sorted(r["status"] for r in result["results"].values()),
            "fleet_from": {h: r.get("fleet_from") for h, r in sorted(result["results"].items())},
            "archive_bytes": archive.stat().st_size, "controller_copies": copies,
            "controller_bytes_sent": copies * archive.stat().st_size,
            "node_to_node_copies": ok_count(evs, NODE_TO_NODE), "wall_s": round(wall, 1),
            "loadavg_1min": [round(load0, 2), round(os.getloadavg()[0], 2)]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default="2,4")
    ap.add_argument("--fanout", type=int, default=2)
    ap.add_argument("--wheelhouse", default="/opt/wheels")
    ap.add_argument("--root", default="/tmp/envbuild-fanout-bench")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    rows = []
    for n in (int(x) for x in args.nodes.split(",")):
        for fanout in (None, args.fanout):
            row = run(n, fanout, Path(args.root) / f"{n}-{fanout or 'star'}", args.wheelhouse)
            print(json.dumps(row), flush=True)
            rows.append(row)
    shutil.rmtree(args.root, ignore_errors=True)
    write_atomic(Path(args.out), json.dumps({
        "what": "a fleet's wheels archive to N loopback sshd nodes: from the controller to each (star) or down a "
                "tree of the nodes (provision --fanout); copies counted from ansible-runner's job events",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
