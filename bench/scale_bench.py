"""Scale bench (issue 38): one environment built once, packed once and sent to 1..16 nodes
through Slurm's sbcast, every node's copy checked by sha256 and used.

    python bench/scale_bench.py [--nodes 1,2,4,8,16] [--tree-width N] [--fanout N] [--out bench/results/scale.json]

1. ``envbuild provision cpu-reference --target local`` with its smoke (the quick start's real environment:
   torch 2.13.0 CPU and its stack, from /opt/wheels) at a path that is every test node's own
   disk (``--local``), on this machine, once; 2. ``envbuild pack`` of it; 3. for each node count
   a fresh Slurm test bed (envbuild.testbed.slurm: slurmd per network namespace, each node's
   ``--local`` path a tmpfs of its own) and one ``launch --packed --smoke-only`` job: sbcast
   sends the pack, each node checks the sha256 and unpacks it, then every node runs envbuild's
   CPU all-reduce smoke (torch imported from its own copy), one rank per node.

Per node count: the job's wall time (sbatch to its terminal state) and the time until every
node had checked and unpacked its copy (``distributed_s``), the bytes each node had sent on its
network interface by then (``ip -s link`` in its namespace, read when the job's output shows
the last copy unpacked, before the smoke's all-reduce adds traffic: what sbcast's tree moved),
the pack's size, the nodes whose copy checked and unpacked (the job's own lines), the
smoke's world size, and the load average. The pack is read once, by the batch host (node1),
from the shared folder it was written to; ``controller_bytes_sent`` (also ``batch_host_bytes_sent``)
is what node1, the one machine holding the pack, sent to the others, ``bytes_sent_all_nodes``
the sum over every node. ``--tree-width`` is the test bed's slurm.conf TreeWidth (how each
slurmd passes the file on), ``--fanout`` sbcast's own first hop (envbuild's default otherwise).
Measured, not asserted: the figures go to ``--out`` and the closing note.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envbuild.bundle import envpack  # noqa: E402
from envbuild.facts.gather import gather_local  # noqa: E402
from envbuild.fsio import write_atomic  # noqa: E402
from envbuild.launch import LaunchOptions  # noqa: E402
from envbuild.launch import submit as sub  # noqa: E402
from envbuild.plan.build import PlanOptions  # noqa: E402
from envbuild.plan.resolve import resolve  # noqa: E402
from envbuild.recipes import load_recipe  # noqa: E402
from envbuild.targets import load_target  # noqa: E402
from envbuild.testbed.slurm import slurm_cluster  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RECIPE = "cpu-reference"


def tx_bytes(ns: str) -> int:
    out = subprocess.run(["ip", "-n", ns, "-s", "-j", "link", "show", "eth0"], capture_output=True, text=True,
                         check=True).stdout
    return int(json.loads(out)[0]["stats64"]["tx"]["bytes"])


def provision(local: Path, home: Path) -> Path:
    prefix = local / RECIPE
    env = {**os.environ, "ENVBUILD_HOME": str(home)}
    t = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "envbuild", "provision", RECIPE, "--target", "local", "--prefix",
                        str(prefix), "--wheelhouse", "/opt/wheels", "--json"],
                       capture_output=True, text=True, env=env, timeout=1800)
    if p.returncode not in (0, 5):
        sys.exit(f"provision failed (exit {p.returncode}): {p.stderr[-2000:]}")
    print(f"provisioned {prefix} in {time.monotonic() - t:.1f} s", flush=True)
    return prefix


class Watch(threading.Thread):
    """Reads every node's sent bytes at the moment the job's output shows all ``n`` copies
    checked and unpacked (before the smoke's all-reduce adds its own traffic)."""

    def __init__(self, home: Path, n: int, namespaces: dict[str, str], since: float):
        super().__init__(daemon=True)
        self.home, self.n, self.namespaces, self.since = home, n, namespaces, since
        self.sent: dict[str, int] | None = None
        self.at: float | None = None
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            outs = [f for f in self.home.glob("runs/*/job/*.out") if f.stat().st_mtime >= self.since]
            if outs and max(outs, key=lambda f: f.stat().st_mtime).read_text(errors="replace").count(
                    "checked the pack") >= self.n:
                self.sent = {name: tx_bytes(ns) for name, ns in self.namespaces.items()}
                self.at = time.monotonic()
                return
            time.sleep(0.1)


def one(n: int, local: Path, packed: envpack.PackedEnv, home: Path, tree_width: int | None,
        fanout: int | None) -> dict:
    rec, tgt = load_recipe(RECIPE), load_target("local")
    with slurm_cluster(n, gpus_per_node=1, cpus_per_node=4, node_local=local, tree_width=tree_width,
                       timeout=120) as cluster:
        facts = gather_local()
        plan = resolve(rec, tgt, facts, None, PlanOptions(prefix=packed.prefix, host="local")).plan
        before = {node.name: tx_bytes(node.netns) for node in cluster.nodes}
        load0 = os.getloadavg()
        t = time.monotonic()
        os.environ["ENVBUILD_HOME"] = str(home)
        watch = Watch(home, n, {node.name: node.netns for node in cluster.nodes}, time.time() - 1)
        watch.start()
        out = sub.launch(rec, tgt, plan, LaunchOptions(scheduler="slurm", nodes=n, gpus_per_node=1,
                                                       smoke_only=True, packed=packed, fanout=fanout),
                         argv=["bench/scale_bench.py"], env=cluster.env, timeout=1800)
        wall = time.monotonic() - t
        watch.done.set()
        watch.join(timeout=5)
        end = watch.sent or {node.name: tx_bytes(node.netns) for node in cluster.nodes}
        sent = {name: end[name] - before[name] for name in before}
        text = Path(out.result.stdout_path).read_text(errors="replace") if out.result.stdout_path else ""
        verified = sorted(set(re.findall(r"envbuild: (\S+) checked the pack", text)))
        coll = out.smoke.get("collective") or {}
        return {"nodes": n, "state": out.result.state, "wall_s": round(wall, 2),
                "distributed_s": round(watch.at - t, 2) if watch.at else None,
                "packed_bytes": packed.bytes, "controller_bytes_sent": sent.get("node1", 0),
                "batch_host_bytes_sent": sent.get("node1", 0),
                "bytes_sent_all_nodes": sum(sent.values()), "bytes_sent_by_node": sent,
                "batch_host_bytes_per_pack": round(sent.get("node1", 0) / packed.bytes, 3),
                "nodes_verified": len(verified), "smoke_world_size": coll.get("world_size"),
                "smoke_ok": coll.get("ok"), "loadavg_before": [round(x, 2) for x in load0],
                "loadavg_after": [round(x, 2) for x in os.getloadavg()]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", default="1,2,4,8,16")
    ap.add_argument("--tree-width", type=int, default=None,
                    help="slurm.conf TreeWidth of the test bed (the fan-out of Slurm's message tree; default Slurm's)")
    ap.add_argument("--fanout", type=int, default=None,
                    help="sbcast's own fan-out (launch --fanout; default envbuild's: 1 up to 16 nodes)")
    ap.add_argument("--local", default="/tmp/envbuild-scale-local", help="the path every node has as its own disk")
    ap.add_argument("--work", default="/tmp/envbuild-scale-work")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "scale.json"))
    args = ap.parse_args()
    local, work = Path(args.local), Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    home = work / "home"
    prefix = local / RECIPE
    if not (prefix / ".envbuild" / "env.sh").is_file():
        provision(local, home)
    t = time.monotonic()
    packed = envpack.pack(prefix, work / f"{RECIPE}.tar.gz")
    pack_s = time.monotonic() - t
    print(f"packed {packed.bytes} bytes in {pack_s:.1f} s (sha256 {packed.sha256[:16]})", flush=True)
    rows = []
    for n in [int(x) for x in args.nodes.split(",")]:
        row = one(n, local, packed, home, args.tree_width, args.fanout)
        print(json.dumps({k: v for k, v in row.items() if k != "bytes_sent_by_node"}), flush=True)
        rows.append(row)
    result = {"bench": "scale", "recipe": RECIPE, "pack_s": round(pack_s, 1), "packed_bytes": packed.bytes,
              "tree_width": args.tree_width or "Slurm's default",
              "fanout": args.fanout or "envbuild's default (launch.job.sbcast_fanout)",
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
              "method": __doc__.split("\n\n")[1:4], "rows": rows}
    write_atomic(Path(args.out), json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
