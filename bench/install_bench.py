"""Install bench: the install phase of a cold provision against `uv pip install` of the same lock.

    python bench/install_bench.py [--recipe cpu-reference] [--wheelhouse /opt/wheels] [--repeat 2]

On one chroot node (envbuild.testbed.chroot, its own /usr and Python, /opt/wheels bind-mounted,
the pip and uv caches bind-mounted from the bench folder so that they stay warm between runs):

1. warm-up: a provision with uv and one with pip, so both caches hold every wheel (the lock is
   made by the first run and used by every later one);
2. cold provisions (a fresh prefix each, ``--no-smoke``) with ``--installer uv`` and
   ``--installer pip``; the install phase is the sum of the package steps' durations (``uv``,
   ``pip-tooling``, ``pip:*``), from start to end event in the run's events.jsonl;
3. the baseline on the same node: a fresh venv (``python3 -m venv --without-pip``, not timed),
   then ``uv pip install --python <venv> -r <every requirement file the provision wrote>
   --require-hashes --no-deps --find-links <wheelhouse>``, timed on the node, with the uv the
   provision pushed; the same with ``python -m pip install`` into a venv with pip.

Goal: the uv install phase within 1.5x of the uv baseline. Prints a table and writes
bench/results/install.json. Wall times on a shared 2-core machine vary: each figure is the
best (min) of ``--repeat`` runs, and every run is kept in the file.
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

OUT = Path(__file__).parent / "results" / "install.json"
INSTALL_STEPS = ("uv", "pip-tooling")  # with every "pip:*" step


def provision(home: Path, cluster, recipe: str, wheelhouse: str, lock: Path, prefix: str,
              installer: str) -> dict:
    argv = [sys.executable, "-m", "envbuild", "provision", "--target", "local", "--recipe", recipe,
            "--hosts", cluster.hosts, "--identity", str(cluster.key), "--insecure",
            "--prefix", prefix, "--wheelhouse", wheelhouse, "--no-smoke", "--json",
            "--installer", installer]
    if lock.exists():
        argv += ["--lock", str(lock)]
    t = time.time()
    p = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "ENVBUILD_HOME": str(home)})
    wall = time.time() - t
    lines = p.stdout.splitlines()
    if not lines or '"type": "result"' not in lines[-1]:
        raise SystemExit(f"provision printed no result (rc {p.returncode}): {p.stderr[-1500:]}")
    out = json.loads(lines[-1])
    if p.returncode != 0:
        raise SystemExit(f"provision failed (rc {p.returncode}): {json.dumps(out['results'])[-1500:]}")
    run_dir = Path(out["run_dir"])
    if not lock.exists() and (run_dir / "lock.lock").exists():
        lock.write_text((run_dir / "lock.lock").read_text())
    steps = step_durations(run_dir / "events.jsonl")
    install = {k: v for k, v in steps.items() if k in INSTALL_STEPS or k.startswith("pip:")}
    return {"installer": installer, "prefix": prefix, "wall_s": round(wall, 2),
            "install_s": round(sum(install.values()), 2), "steps_s": steps, "run_dir": str(run_dir)}


def step_durations(events: Path) -> dict[str, float]:
    """{step: seconds from its start event to its end event} of one node's run."""
    started, out = {}, {}
    for line in events.read_text().splitlines():
        ev = json.loads(line)
        if ev["kind"] == "start":
            started[ev["step"]] = ev["ts"]
        elif ev["kind"] in ("ok", "changed") and ev["step"] in started:
            out[ev["step"]] = round(ev["ts"] - started[ev["step"]], 2)
    return out


def node_seconds(node, script: str) -> float:
    """Run ``script`` on the node (sh); the seconds it took, measured on the node."""
    p = node.ssh(f"set -e; s=$(date +%s.%N); {script} >/tmp/bench.out 2>&1; e=$(date +%s.%N); "
                 "echo \"$s $e\"", check=False, timeout=1800)
    if p.returncode != 0:
        detail = node.ssh("tail -20 /tmp/bench.out", check=False).stdout
        raise SystemExit(f"baseline failed on the node (rc {p.returncode}): {p.stderr[-600:]} {detail}")
    s, e = p.stdout.split()[-2:]
    return round(float(e) - float(s), 2)


def baselines(node, prefix: str, wheelhouse: str, n: int) -> dict:
    """uv pip install and pip install of the lock's requirement files into fresh venvs."""
    reqs = f"{prefix}/.envbuild/requirements"
    node.ssh(f"cat {reqs}/*.txt > /tmp/lock-requirements.txt")  # pip-tooling, pip-torch-deps, ...
    uv = node.ssh(f"ls {prefix}/.envbuild/tools/uv ~/.cache/envbuild/uv/*/uv 2>/dev/null | head -1").stdout.strip()
    common = f"-r /tmp/lock-requirements.txt --require-hashes --no-deps --find-links={wheelhouse}"
    out = {"uv": [], "pip": []}
    for i in range(n):
        venv = f"/tmp/fresh-uv{i}"
        node.ssh(f"rm -rf {venv} && python3 -m venv --without-pip {venv}")
        # the CA bundle the node's pip trusts (PIP_CERT), as the provision's uv steps take it
        out["uv"].append(node_seconds(node, 'SSL_CERT_FILE="${SSL_CERT_FILE:-$PIP_CERT}" '
                                            f"{uv} pip install --python {venv}/bin/python {common}"))
        venv = f"/tmp/fresh-pip{i}"
        node.ssh(f"rm -rf {venv} && python3 -m venv {venv}")
        out["pip"].append(node_seconds(node, f"{venv}/bin/python -m pip install --no-input "
                                             f"--disable-pip-version-check {common}"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--recipe", default="cpu-reference")
    ap.add_argument("--wheelhouse", default="/opt/wheels")
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    why = chroot.why_no_wheel_cluster(Path(a.wheelhouse))
    if why:
        sys.exit(f"cannot bench: {why}")
    runs, base = [], {"uv": [], "pip": []}
    with tempfile.TemporaryDirectory(prefix="eb-install-") as tmp:
        folder = Path(tmp)
        for cache in ("pip", "uv"):
            (folder / cache).mkdir()
        lock = folder / "bench.lock"
        binds = [(a.wheelhouse, a.wheelhouse, True), (folder / "pip", "/root/.cache/pip", False),
                 (folder / "uv", "/root/.cache/uv", False)]
        cluster = chroot.ChrootCluster(folder / "nodes", 1, binds=binds, base=170, prefix="inst")
        with cluster as nodes:
            home = folder / "home"
            for installer in ("uv", "pip"):  # warm-up: caches filled, lock made
                r = provision(home, cluster, a.recipe, a.wheelhouse, lock, f"/opt/envs/warm-{installer}", installer)
                print(f"warm-up {installer:<3} install {r['install_s']:6.2f} s  wall {r['wall_s']:6.2f} s", flush=True)
            for i in range(a.repeat):
                for installer in ("uv", "pip"):
                    r = provision(home, cluster, a.recipe, a.wheelhouse, lock, f"/opt/envs/cold-{installer}{i}", installer)
                    runs.append(r)
                    print(f"cold    {installer:<3} install {r['install_s']:6.2f} s  wall {r['wall_s']:6.2f} s  "
                          f"{r['steps_s']}", flush=True)
            b = baselines(nodes[0], "/opt/envs/cold-uv0", a.wheelhouse, a.repeat)
            print(f"baseline uv pip install {b['uv']} s, pip install {b['pip']} s", flush=True)
            base = b
    best = {k: min(r["install_s"] for r in runs if r["installer"] == k) for k in ("uv", "pip")}
    summary = {"provision_install_uv_s": best["uv"], "provision_install_pip_s": best["pip"],
               "baseline_uv_pip_install_s": min(base["uv"]), "baseline_pip_install_s": min(base["pip"])}
    summary["ratio_uv_provision_to_uv_baseline"] = round(best["uv"] / summary["baseline_uv_pip_install_s"], 2)
    # the same without the uv step (the binary's first push to a node; a node that has it skips it)
    no_push = min(r["install_s"] - r["steps_s"].get("uv", 0) for r in runs if r["installer"] == "uv")
    summary["provision_install_uv_without_push_s"] = round(no_push, 2)
    summary["ratio_without_push"] = round(no_push / summary["baseline_uv_pip_install_s"], 2)
    summary["ratio_pip_provision_to_pip_baseline"] = round(best["pip"] / summary["baseline_pip_install_s"], 2)
    summary["goal_within_1_5x"] = summary["ratio_uv_provision_to_uv_baseline"] <= 1.5
    write_atomic(OUT, json.dumps({"recipe": a.recipe, "node": "chroot (Debian 12, python3.11)",
                                  "cpu_count": os.cpu_count(), "runs": runs, "baselines": base,
                                  "summary": summary}, indent=2) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
