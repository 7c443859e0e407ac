"""A forced re-provision of cpu-reference on this machine: every step runs, nothing is downloaded,
so what is measured is Ansible's cost per step beside the steps' own work (what the suite's
provisions pay over and over).

    python bench/force_provision.py [--repeat 4] [--checkout DIR ...] [--wheelhouse /opt/wheels]
                                    [--out bench/results/force-provision.json]

Each checkout given (default: this one) provisions its own prefix once cold, then ``--repeat``
times with ``--force --no-smoke``, the checkouts taking turns so that load on the machine falls
on all of them alike (an A/B: ``git worktree add /tmp/base REV``, then ``--checkout /tmp/base
--checkout .``). Per run: the wall time, the CPU time of the provision and every process it waited for
(``RUSAGE_CHILDREN``), run.json's ``phase_s.ansible``, the sum of the module runs (from
ansible-runner's job events: the ``duration`` of every task that does not only announce, include
or skip: the steps' work, the state check, the markers) and what is left: Ansible's own time. A row per checkout (its
commit, the mean and each run) is appended to the output; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "force-provision.json"
#: tasks of the role that announce, include or skip rather than run a step's work
BOOKKEEPING = ("Envbuild start", "Envbuild done", "Envbuild batch", "Envbuild step", "Envbuild fleet")


def provision(checkout: Path, home: Path, prefix: Path, wheelhouse: str, force: bool) -> dict:
    argv = [sys.executable, "-m", "envbuild", "provision", "--target", "local", "--prefix", str(prefix),
            "--wheelhouse", wheelhouse, "--no-smoke", "--json"] + (["--force"] if force else [])
    env = {**os.environ, "ENVBUILD_HOME": str(home), "PYTHONPATH": str(checkout)}
    started, before = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(home))
    wall, after = time.monotonic() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = p.stdout.splitlines()
    if not lines or '"type": "result"' not in lines[-1]:
        raise SystemExit(f"{checkout}: provision printed no result (rc {p.returncode}): {p.stderr[-800:]}")
    run_dir = Path(json.loads(lines[-1])["run_dir"])
    ansible = json.loads((run_dir / "run.json").read_text()).get("phase_s", {}).get("ansible")
    work = 0.0
    for f in (run_dir / "ansible" / "artifacts").glob("*/job_events/*.json"):
        ev = json.loads(f.read_text())
        data = ev.get("event_data") or {}
        task = str(data.get("task") or "").split(" : ", 1)[-1]
        if ev.get("event") in ("runner_on_ok", "runner_on_failed") and not task.startswith(BOOKKEEPING):
            work += float(data.get("duration") or 0)
    return {"rc": p.returncode, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "ansible_s": ansible,
            "tasks_s": round(work, 2),
            "overhead_s": round(ansible - work, 2) if ansible is not None else None}


def commit_of(checkout: Path) -> str:
    """The checkout's commit, ``+changes`` when its tracked files differ from it."""
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return head + ("+changes" if dirty else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkout", type=Path, action="append", help="a checkout of envbuild (repeatable)")
    ap.add_argument("--repeat", type=int, default=4)
    ap.add_argument("--wheelhouse", default="/opt/wheels")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    checkouts = [c.resolve() for c in (args.checkout or [ROOT])]
    runs: dict[Path, list[dict]] = {c: [] for c in checkouts}
    with tempfile.TemporaryDirectory(prefix="force-provision-") as tmp:
        for i, c in enumerate(checkouts):
            home, prefix = Path(tmp) / f"home{i}", Path(tmp) / f"env{i}"
            home.mkdir()
            provision(c, home, prefix, args.wheelhouse, force=False)  # cold, not counted
        for _ in range(args.repeat):
            for i, c in enumerate(checkouts):
                runs[c].append(provision(c, Path(tmp) / f"home{i}", Path(tmp) / f"env{i}", args.wheelhouse,
                                         force=True))
    rows = json.loads(args.out.read_text()).get("runs", []) if args.out.is_file() else []
    date = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    for c, rs in runs.items():
        mean = {k: round(sum(r[k] for r in rs) / len(rs), 2) for k in ("wall_s", "cpu_s", "ansible_s", "tasks_s", "overhead_s")}
        rows.append({"date": date, "commit": commit_of(c), "checkout": str(c), "cores": os.cpu_count(),
                     "mean": mean, "runs": rs})
        print(f"{commit_of(c)[:10]} {c}: wall {mean['wall_s']} s, CPU {mean['cpu_s']} s, ansible {mean['ansible_s']} s "
              f"(steps' tasks {mean['tasks_s']} s, Ansible's own {mean['overhead_s']} s), {len(rs)} runs")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"about": __doc__.split("\n")[0], "runs": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
