"""envbuild provision for real onto 2 isolated chroot nodes (own /usr, own PID namespace).

One module-wide cluster: cold provision, no-op rerun, a failing node, a killed run that
resumes, an unreachable host. torch 2.13.0 CPU comes from /opt/wheels (bind-mounted read-only);
the nodes share one pip cache.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envbuild.testbed import chroot

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WHEELS = Path("/opt/wheels")
PREFIX = "/opt/envs/ref"
RECIPE = """\
schema: 1
name: ref-test
title: Reference test recipe
description: torch CPU plus a small package
published: {url: "https://example.invalid/ref"}
python: "3.11"
targets: [local]
environment: {kind: venv}
packages:
  - {name: torch, version: "2.13.0", cuda: cpu, why: "CPU wheel"}
  - {name: six, version: "1.16.0", why: "small pure-Python package"}
import_check: [torch, six]
"""


@pytest.fixture(scope="module")
def bed(module_tmp):
    why = chroot.why_no_wheel_cluster(WHEELS)
    if why:
        pytest.skip(why)
    base = module_tmp("chroot")
    cluster = chroot.wheel_cluster(base, 2, base=80, wheels=WHEELS)
    nodes = cluster.__enter__()
    (base / "ref.yaml").write_text(RECIPE)
    try:
        yield {"nodes": nodes, "cluster": cluster, "base": base, "home": base / "home",
               "recipe": base / "ref.yaml"}
    finally:
        cluster.stop()


def provision(bed, *extra, hosts=None, check_json=True):
    env = {**os.environ, "ENVBUILD_HOME": str(bed["home"])}
    lock = bed["base"] / "ref.lock"
    argv = [sys.executable, "-m", "envbuild", "provision", "--target", "local",
            "--recipe", str(bed["recipe"]), "--hosts", hosts or bed["cluster"].hosts,
            "--identity", str(bed["cluster"].key), "--insecure", "--prefix", PREFIX,
            "--wheelhouse", str(WHEELS), "--no-smoke", "--json", *extra]
    if lock.exists():
        argv += ["--lock", str(lock)]
    t = time.time()
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1500)
    took = time.time() - t
    lines = p.stdout.strip().split("\n")  # JSON Lines: events, then {"type": "result", ...}
    assert lines and '"type": "result"' in lines[-1], p.stdout[-2000:] + p.stderr[-2000:]
    out = json.loads(lines[-1])
    run = Path(out["run_dir"])
    if (run / "lock.lock").exists() and not lock.exists():
        lock.write_text((run / "lock.lock").read_text())
    return p.returncode, out, run, took


def test_cold_provision_of_two_nodes_then_torch_runs(bed):
    rc, out, run, took = provision(bed)
    bed["cold_s"] = took
    assert rc == 5, json.dumps(out["results"], indent=1)[-3000:]  # no smoke: nothing judged (NOT JUDGED, exit 5)
    assert set(out["results"]) == {n.addr for n in bed["nodes"]}
    assert json.loads((run / "run.json").read_text())["status"] == "ok"
    for node in bed["nodes"]:
        r = node.ssh(f"{PREFIX}/bin/python -c 'import torch; print(float((torch.ones(3, 2) @ torch.ones(2, 4)).sum()))'")
        assert r.stdout.strip().splitlines()[-1] == "24.0"
        assert (node.upper / PREFIX.lstrip("/") / "bin/python").exists()  # in the node's own layer
        observed = json.loads((run / "nodes" / node.addr / "observed.json").read_text())
        assert observed["packages"]["torch"].startswith("2.13.0")
    assert not Path(PREFIX).exists()  # nothing landed on the host


def test_second_run_changes_nothing(bed):
    rc, out, run, took = provision(bed)
    assert rc == 5  # no smoke: nothing judged (NOT JUDGED, exit 5)
    for host, res in out["results"].items():
        plan = json.loads((run / "nodes" / host / "plan.json").read_text())
        assert res["changed"] == [] and res["skipped"] == [s["id"] for s in plan["steps"]]
    assert took < bed.get("cold_s", float("inf"))


def test_one_failing_node_leaves_the_others(bed):
    bad = bed["nodes"][-1]
    bad.ssh(f"rm -f {PREFIX}/.envbuild/state/env-file.done {PREFIX}/.envbuild/state/import-check.done "
            f"&& rm -f {PREFIX}/.envbuild/env.sh && mkdir -p {PREFIX}/.envbuild/env.sh/blocker")
    try:
        rc, out, run, _ = provision(bed)
        assert rc == 4
        res = out["results"][bad.addr]
        assert res["status"] == "failed" and res["failed_step"] == "env-file"
        assert res["log_tail"]
        assert json.loads((run / "nodes" / bad.addr / "result.json").read_text())["failed_step"] == "env-file"
        for node in bed["nodes"][:-1]:
            assert out["results"][node.addr]["status"] == "ok"
        assert json.loads((run / "run.json").read_text())["status"] == "partial"
    finally:
        bad.ssh(f"rm -rf {PREFIX}/.envbuild/env.sh")


def test_killed_run_resumes_at_first_unfinished_step(bed):
    for node in bed["nodes"]:
        node.ssh(f"rm -f {PREFIX}/.envbuild/state/pip:torch.done {PREFIX}/.envbuild/state/pip:packages.done "
                 f"{PREFIX}/.envbuild/state/env-file.done {PREFIX}/.envbuild/state/import-check.done")
    env = {**os.environ, "ENVBUILD_HOME": str(bed["home"])}
    argv = [sys.executable, "-m", "envbuild", "provision", "--target", "local", "--recipe",
            str(bed["recipe"]), "--hosts", bed["cluster"].hosts, "--identity", str(bed["cluster"].key),
            "--insecure", "--prefix", PREFIX, "--wheelhouse", str(WHEELS), "--no-smoke",
            "--lock", str(bed["base"] / "ref.lock")]
    runs = bed["home"] / "runs"
    before = set(runs.iterdir()) if runs.is_dir() else set()
    log = bed["base"] / "killed-run.log"
    with log.open("w") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    events = None
    deadline = time.time() + 600
    try:
        while time.time() < deadline:
            assert proc.poll() is None, log.read_text()[-3000:]  # it must still be running
            # the run in progress: a new folder (runs/latest moves only when a run finishes)
            new = [d for d in set(runs.iterdir() if runs.is_dir() else ()) - before
                   if d.is_dir() and not d.is_symlink()]
            latest = new[0] / "events.jsonl" if new else None
            if latest is not None and latest.exists():
                evs = [json.loads(x) for x in latest.read_text().splitlines() if x.strip()]
                if any(e["step"] == "pip:torch" and e["kind"] in ("ok", "changed") for e in evs):
                    events = evs
                    break
            time.sleep(0.2)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    assert events is not None, "the run never finished pip:torch"
    rc, out, run, _ = provision(bed)
    assert rc == 5  # no smoke: nothing judged (NOT JUDGED, exit 5)
    for host, res in out["results"].items():
        finished_before = [e["step"] for e in events if e["host"] == host and e["kind"] in ("ok", "changed")]
        assert set(finished_before) <= set(res["skipped"])
        assert "import-check" in res["changed"]


def test_unreachable_host_is_reported(bed):
    rc, out, run, _ = provision(bed, hosts="root@127.0.0.1:9")
    assert rc == 3
    res = out["results"]["127.0.0.1"]
    assert res["status"] == "unreachable" and "127.0.0.1" in res["log_tail"]
    assert not (run / "nodes" / "127.0.0.1" / "plan.json").exists()


def test_each_node_of_a_cluster_runs_on_a_cpu_of_its_own(bed):
    """Test nodes are pinned as real nodes are separate: torch in each node sizes its threads
    to its own CPU, so two nodes' smokes at once are not oversubscribed threads."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("this machine has one CPU; the nodes share it")
    seen = [n.ssh("grep Cpus_allowed_list /proc/self/status; nproc").stdout.split() for n in bed["nodes"]]
    assert [s[-1] for s in seen] == ["1", "1"]
    assert seen[0][1] != seen[1][1], seen
