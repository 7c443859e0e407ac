"""No-op provision bench: a provision with nothing to do, reality check included.

    python bench/noop_bench.py [--nodes local,1,8] [--repeat 5] [--wheelhouse /opt/wheels]
                               [--root /tmp/envbuild-noop-bench]

Each configuration is provisioned once (cold, when its environments are not there yet from an
earlier bench run under --root), then ``envbuild provision`` runs --repeat times with nothing to
do; the figure is the wall time of the whole command (``python -m envbuild provision ...``:
interpreter start, facts, preflight, lock, plan, the probe of every node -- step markers, the
effect of every step checked on the node, the observed environment --, the run directory and
its report). ``local`` is this machine (``--target local``); ``1`` and ``8`` are loopback sshd
nodes (``envbuild.testbed.sshd``) reached over SSH with host keys checked; they share this
machine's filesystem, so each gets its own environment (``--prefix ROOT/envs/{node}``), each
with torch 2.13.0+cpu from the wheelhouse. Goals: <= 1.5 s on one node, <= 2 s on 8.
Each row also records the 1-minute load average before and after (other work on a shared
machine stretches wall times) and the CPU time of the command and its children (for
``local`` that includes the node side; sshd's sessions are not its children).

Writes bench/results/noop.json and prints a table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envbuild.fsio import write_atomic  # noqa: E402
from envbuild.record import read_run_info  # noqa: E402

OUT = Path(__file__).parent / "results" / "noop.json"
GOALS = {"local": 1.5, "1": 1.5, "8": 2.0}
NOT_JUDGED_EXIT = 5  # README's exit codes: a provision whose run nothing judged (no smoke)


def provision(home: Path, extra: list[str], wheelhouse: str, env: dict) -> dict:
    argv = [sys.executable, "-m", "envbuild", "provision", "--target", "local", "--wheelhouse", wheelhouse,
            "--no-smoke", "--json", *extra]
    t, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **env, "ENVBUILD_HOME": str(home)})
    wall, r1 = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)  # the command and its children
    out = _result(p.stdout)
    if out is None:
        raise SystemExit(f"provision printed no result (rc {p.returncode}): {p.stderr[-1500:]}")
    run = read_run_info(Path(out["run_dir"]))
    return {"rc": p.returncode, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "ansible": run.ansible or "started",
            "verdict": run.verdict,
            "changed": sorted({s for r in out["results"].values() for s in r["changed"]}),
            "statuses": sorted({r["status"] for r in out["results"].values()})}


def _result(stdout: str) -> dict | None:
    """The final result of ``provision --json``: a line {"type": "result", ...}, or the
    indented object that ends the output."""
    lines = stdout.splitlines()
    for line in reversed(lines):
        with contextlib.suppress(ValueError):
            data = json.loads(line)
            if isinstance(data, dict) and data.get("type") == "result":
                return data
    start = next((i for i, line in enumerate(lines) if line == "{"), None)
    return json.loads("\n".join(lines[start:])) if start is not None else None


def bench(name: str, home: Path, extra: list[str], env: dict, wheelhouse: str, repeat: int) -> dict:
    cold = provision(home, extra, wheelhouse, env)  # installs, or repairs, or nothing to do
    print(f"{name:>6}: first run rc={cold['rc']} {cold['wall_s']:.2f} s ({cold['ansible'][:11]}), "
          f"changed {cold['changed']}", flush=True)
    load_before = os.getloadavg()[0]
    runs = [provision(home, extra, wheelhouse, env) for _ in range(repeat)]
    walls = [r["wall_s"] for r in runs]
    row = {"config": name, "first": cold, "noop_wall_s": walls, "median_s": round(statistics.median(walls), 3),
           "loadavg_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],  # others' work on the machine
           "cpu_s_median": round(statistics.median(r["cpu_s"] for r in runs), 3),
           "min_s": min(walls), "max_s": max(walls), "goal_s": GOALS.get(name),
           # --no-smoke: nothing is judged, so the documented outcome is exit 5, NOT JUDGED
           "all_ok": all(r["rc"] == NOT_JUDGED_EXIT and r["changed"] == [] and r["verdict"] == "NOT JUDGED"
                         for r in runs),
           "ansible_started": sum(not r["ansible"].startswith("not started") for r in runs)}
    row["meets_goal"] = row["goal_s"] is not None and row["median_s"] <= row["goal_s"]
    print(f"{name:>6}: no-op median {row['median_s']:.2f} s (min {row['min_s']:.2f}, max {row['max_s']:.2f}) "
          f"goal {row['goal_s']} s, cpu {row['cpu_s_median']} s, ok={row['all_ok']}, "
          f"ansible started {row['ansible_started']}x, "
          f"load {row['loadavg_1min']}", flush=True)
    return row


def split(bed, home: Path) -> dict:
    """Where a no-op's node time goes (min of 3, all nodes in parallel as provision does): an
    SSH command that does nothing (connection and the node user's shell start-up), the facts
    script alone, the state probe alone, and both in one command (what provision runs)."""
    os.environ.update(bed.env)
    from envbuild.provision.early import NodeRunner, facts_and_probe
    from envbuild.provision.noop import probe_args
    from envbuild.actions.nodestate import probe_command
    from envbuild.connect import ssh
    from envbuild.connect.nodes import read_inventory
    from envbuild.facts.gather import gather
    from envbuild.plan.model import Plan

    nodes = read_inventory(str(bed.inventory_path))
    latest = home / "runs" / "latest" / "nodes"
    plans = {n.name: Plan.model_validate_json((latest / n.name / "plan.json").read_text()) for n in nodes}

    def probe(n):
        python, prefix, steps, observe = probe_args(plans[n.name])
        return ssh.run(n, probe_command(python, prefix, steps, observe=observe))[0]

    jobs = {"ssh_true": lambda n: ssh.run(n, "true")[0],
            "facts_only": lambda n: gather(NodeRunner(n), host=n.name, skip=("pip_list",)),
            "probe_only": probe,
            "facts_and_probe": lambda n: facts_and_probe(n, plans[n.name])}
    out = {}
    for name, fn in jobs.items():
        times = []
        for _ in range(3):
            t = time.perf_counter()
            ssh.each(nodes, fn)
            times.append(time.perf_counter() - t)
        out[name] = round(min(times), 3)
    print(f"        node side: {out}", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", default="local,1,8", help="configurations: local and/or node counts")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--wheelhouse", default="/opt/wheels")
    ap.add_argument("--root", default="/tmp/envbuild-noop-bench", help="kept between bench runs (the envs)")
    a = ap.parse_args()
    root = Path(a.root)
    root.mkdir(parents=True, exist_ok=True)
    rows = []
    for config in a.nodes.split(","):
        if config == "local":
            rows.append(bench("local", root / "home-local", ["--prefix", str(root / "envs" / "local")], {},
                              a.wheelhouse, a.repeat))
            continue
        from envbuild.testbed.sshd import ssh_nodes

        count = int(config)
        with contextlib.ExitStack() as stack:
            bed = stack.enter_context(ssh_nodes(count))
            # the testbed's inventory: its known_hosts, and /usr/bin/python3 for Ansible's modules
            extra = ["--inventory", str(bed.inventory_path), "--prefix", str(root / "envs" / "{node}")]
            rows.append(bench(config, root / f"home-{count}", extra, bed.env, a.wheelhouse, a.repeat))
            rows[-1]["split_s"] = split(bed, root / f"home-{count}")
    previous = json.loads(OUT.read_text()) if OUT.exists() else {}
    history = previous.get("history", [])
    history.append({"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "rows": rows})
    result = {"what": "wall time of `envbuild provision` with nothing to do, reality check included",
              "machine": {"cpus": os.cpu_count(), "cpu": _cpu_model(), "python": platform.python_version()},
              "recipe": "cpu-reference (torch 2.13.0+cpu and its closure, 4 recipe packages)",
              "note": "a shared machine: compare runs by their loadavg_1min; the quietest is `best`",
              "best": min(history, key=lambda h: max(max(r["loadavg_1min"]) for r in h["rows"])),
              "history": history[-12:]}
    write_atomic(OUT, json.dumps(result, indent=2) + "\n")
    return 0 if all(r["all_ok"] for r in rows) else 1


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
