"""The test suite's wall time, as CI runs it: .ci/test (the README's command once set up), timed.

    python bench/suite_bench.py [--label warm|new] [--ci] [--cpu] [--out bench/results/suite.json] [-- EXTRA...]

``--ci`` runs ``bash .ci/run`` instead (Debian packages, the venv, then the same command; the
JUnit report is asked for through PYTEST_ADDOPTS), so the row is CI's whole run as CI runs it.

Runs ``bash .ci/test`` (what the README's command, ``.ci/run``, runs once it has set up) in a
shell from the checkout's root, with a JUnit XML report added, then
records one row in bench/results/suite.json: wall time, the numbers of tests passed, failed,
skipped and errored, every skip with its reason, the 25 slowest tests, every module's test
time (read back by tests/conftest.py: the order the modules are handed to the workers in), the
1-minute load average before and after (sampled every 10 s while it runs: mean and max), the CPU's
split over the run (user, system, iowait, idle, from /proc/stat) and its busy share (neither
idle nor iowait) of each 30 s from the start, the last window as long as the run had left
(``busy_by_30s``: where cores sat idle shows there), the lowest MemAvailable and the
peak use of the file system of the suite's temp folder (.ci/test-tmp's; what a tmpfs there must
hold; sampled every 2 s), the machine (cores,
memory), the commit, and the label (``warm``: a machine that ran the suite before and keeps its
caches; ``new``: caches emptied first -- the caller's job, e.g. a fresh HOME and cache dirs).
``--cpu`` adds each test's CPU time, its children's included (bench/cpu_plugin.py), summed per
module (``modules_cpu``; ``cpu_slowest``: the 25 costliest tests). Nothing is asserted: the
figures are measured and kept (rows append; the newest is last).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "suite.json"


def test_command() -> str:
    """The suite as the README's command (``.ci/run``) runs it once set up: ``.ci/test``."""
    if not (ROOT / ".ci" / "test").is_file():
        sys.exit(".ci/test is missing")
    return "bash .ci/test"


def load1() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def cpu_times() -> list[int]:
    """/proc/stat's first line: user, nice, system, idle, iowait, irq, softirq, steal (ticks)."""
    return [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]


def cpu_split(before: list[int], after: list[int]) -> dict:
    """Shares of the machine's CPU time between two samples: user (with nice), system (with irq
    and softirq), iowait, idle."""
    d = [b - a for a, b in zip(before, after)]
    total = sum(d) or 1
    return {"user": round((d[0] + d[1]) / total, 3), "system": round((d[2] + d[5] + d[6]) / total, 3),
            "iowait": round(d[4] / total, 3), "idle": round(d[3] / total, 3)}


def busy_share(before: list[int], after: list[int]) -> float:
    """The machine's busy share between two samples: neither idle nor iowait (steal counts as
    busy, as in the A/B records of bench/results)."""
    split = cpu_split(before, after)
    return round(1 - split["idle"] - split["iowait"], 2)


def mem_available() -> int:
    """MemAvailable in bytes."""
    line = next(x for x in Path("/proc/meminfo").read_text().splitlines() if x.startswith("MemAvailable:"))
    return int(line.split()[1]) * 1024


def used_bytes(folder: str) -> int:
    """Bytes in use on the filesystem that holds ``folder``."""
    st = os.statvfs(folder)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def junit_summary(path: Path) -> dict:
    tree = ET.parse(path)
    cases = tree.getroot().iter("testcase")
    out = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "skips": [], "slowest": [], "modules": {}}
    timed = []
    modules: dict[str, float] = {}
    for case in cases:
        name = f"{case.get('classname')}::{case.get('name')}"
        timed.append((float(case.get("time") or 0), name))
        module = module_of(case.get("classname") or "")
        modules[module] = modules.get(module, 0.0) + float(case.get("time") or 0)
        if (skip := case.find("skipped")) is not None:
            out["skipped"] += 1
            out["skips"].append({"test": name, "reason": skip.get("message") or skip.text or ""})
        elif case.find("failure") is not None:
            out["failed"] += 1
        elif case.find("error") is not None:
            out["errors"] += 1
        else:
            out["passed"] += 1
    out["tests"] = out["passed"] + out["failed"] + out["errors"] + out["skipped"]
    out["slowest"] = [{"test": n, "s": round(t, 1)} for t, n in sorted(timed, reverse=True)[:25]]
    # every module's test time (setup and teardown of its fixtures included), longest first: the
    # order tests/conftest.py hands modules to the xdist workers in (tests/README.md)
    out["modules"] = {m: round(t, 1) for m, t in sorted(modules.items(), key=lambda x: -x[1])}
    return out


def cpu_per_test(folder: Path) -> dict:
    """bench/cpu_plugin.py's lines (one per test, per worker) summed per module, and the 25 tests
    that cost the most CPU (the worker's own and its reaped descendants')."""
    tests = [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.read_text().splitlines()]
    modules: dict[str, float] = {}
    for t in tests:
        t["cpu_s"] = round(t["own_cpu_s"] + t["children_cpu_s"], 2)
        module = t["test"].split("::", 1)[0]
        modules[module] = modules.get(module, 0.0) + t["cpu_s"]
    top = sorted(tests, key=lambda t: -t["cpu_s"])[:25]
    return {"cpu_total_s": round(sum(modules.values()), 1),
            "modules_cpu": {m: round(c, 1) for m, c in sorted(modules.items(), key=lambda x: -x[1])},
            "cpu_slowest": top}


def module_of(classname: str) -> str:
    """``tests.lock.test_x`` or ``tests.lock.test_x.TestClass`` -> ``tests/lock/test_x.py``: JUnit's
    classname to the module's path, the key of its time in bench/results/suite.json."""
    parts = classname.split(".")
    for i in range(len(parts), 0, -1):
        if parts[i - 1].startswith("test_"):
            return "/".join(parts[:i]) + ".py"
    return classname


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--label", default="warm", choices=["warm", "new"])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--ci", action="store_true", help="run bash .ci/run (CI's whole run)")
    ap.add_argument("--cpu", action="store_true",
                    help="also the CPU time of every test, children included (bench/cpu_plugin.py)")
    ap.add_argument("extra", nargs="*", help="extra pytest arguments (after --)")
    args = ap.parse_args()
    cpu_log = None
    if args.cpu:
        cpu_log = Path(tempfile.mkdtemp(prefix="suite-cpu-"))
        args.extra = ["-p", "bench.cpu_plugin", *args.extra]
    xml = Path(os.environ.get("TMPDIR", "/tmp")) / f"suite-bench-{os.getpid()}.xml"
    env = dict(os.environ)
    if cpu_log:
        env["ENVBUILD_CPU_LOG"] = str(cpu_log)
    if args.ci:
        command = "bash .ci/run"
        env["PYTEST_ADDOPTS"] = f"{env.get('PYTEST_ADDOPTS', '')} --junitxml={xml} {' '.join(args.extra)}".strip()
    else:
        command = f"{test_command()} --junitxml={xml} {' '.join(args.extra)}".strip()
    # the suite's temp folder as .ci/test picks it (.ci/test-tmp; none: pytest's /tmp): the peak use
    # of its file system is what a tmpfs there must hold
    temp = subprocess.run(["bash", str(ROOT / ".ci" / "test-tmp")], capture_output=True, text=True,
                          check=True).stdout.strip() or "/tmp"
    samples, stop = [load1()], threading.Event()
    temp_base, temp_peak, mem_min = used_bytes(temp), 0, mem_available()
    busy: list[float] = []  # the machine's busy share (neither idle nor iowait) of each 30 s
    window = cpu_times()

    def sample():
        nonlocal temp_peak, mem_min, window
        n = 0
        while not stop.wait(2):
            temp_peak, mem_min = max(temp_peak, used_bytes(temp) - temp_base), min(mem_min, mem_available())
            n += 1
            if n % 5 == 0:
                samples.append(load1())
            if n % 15 == 0:
                now = cpu_times()
                busy.append(busy_share(window, now))
                window = now

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    before, cpu_before = load1(), cpu_times()
    started = time.monotonic()
    rc = subprocess.run(["bash", "-c", command], cwd=ROOT, env=env).returncode
    wall = time.monotonic() - started
    stop.set()
    sampler.join()
    busy.append(busy_share(window, cpu_times()))  # the last window: what the run had left of 30 s
    cpu = cpu_split(cpu_before, cpu_times())
    after = load1()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    mem = next((int(line.split()[1]) // 1024 for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal:")), None)
    row = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "label": args.label,
           "command": command + (f" (PYTEST_ADDOPTS={env['PYTEST_ADDOPTS']})" if args.ci else ""),
           "exit": rc, "wall_s": round(wall, 1), "commit": commit,
           "machine": {"cores": os.cpu_count(), "mem_mib": mem, "python": platform.python_version()},
           "load1": {"before": before, "after": after, "mean": round(sum(samples) / len(samples), 2),
                     "max": max(samples)},
           "cpu": cpu, "busy_by_30s": busy, "mem_available_min_gib": round(mem_min / 2**30, 1),
           "temp": {"folder": temp, "peak_gib": round(temp_peak / 2**30, 1)},
           **(junit_summary(xml) if xml.is_file() else {"junit": "not written"}),
           **(cpu_per_test(cpu_log) if cpu_log else {})}
    if cpu_log:
        shutil.rmtree(cpu_log, ignore_errors=True)
    rows = json.loads(args.out.read_text()).get("runs", []) if args.out.is_file() else []
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"about": __doc__.split("\n")[0], "runs": rows + [row]}, indent=1) + "\n")
    print(f"suite: {row['wall_s']} s, exit {rc}, {row.get('tests')} tests "
          f"({row.get('passed')} passed, {row.get('skipped')} skipped, {row.get('failed')} failed), "
          f"load1 mean {row['load1']['mean']}, cpu {cpu}, temp peak {row['temp']['peak_gib']} GiB on "
          f"{temp}, MemAvailable min {row['mem_available_min_gib']} GiB")
    return rc


if __name__ == "__main__":
    sys.exit(main())
