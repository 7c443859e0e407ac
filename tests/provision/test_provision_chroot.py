"""envbuild provision for real onto 2 isolated chroot nodes (own /usr, own PID namespace).

One module-wide cluster of two nodes started over the run's reference layer (``reference_node``
in tests/conftest.py: cpu-reference provisioned cold onto a node of its own, asserted by
tests/provision/test_provision_uv.py): a provision from this module's own controller home finds every
step's effect on both nodes and changes nothing; then a failing node, a killed run that
resumes, an unreachable host. The provisions here pass ``--no-push-wheels``: each node installs
from its own wheelhouse, as the reference node did (a fleet's pushed wheels are another install
source, so another plan: tests/provision/test_fleet_faults.py's). torch 2.13.0 CPU comes from /opt/wheels (bind-mounted
read-only); the nodes share one pip cache. A cold provision of several nodes at once is
tests/provision/test_fleet_faults.py's (4 sshd nodes, with faults); no chroot test provisions two nodes
cold any more.
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


@pytest.fixture(scope="module")
def bed(module_tmp, reference_node):
    base = module_tmp("chroot")
    cluster = chroot.wheel_cluster(base, 2, base=80, wheels=WHEELS, layers=[Path(reference_node["layer"])])
    nodes = cluster.__enter__()
    try:
        yield {"nodes": nodes, "cluster": cluster, "base": base, "home": base / "home",
               "lock": Path(reference_node["lock"]), "prefix": reference_node["prefix"],
               "cold_s": reference_node["provision_s"]}
    finally:
        cluster.stop()


def provision(bed, *extra, hosts=None):
    env = {**os.environ, "ENVBUILD_HOME": str(bed["home"])}
    argv = [sys.executable, "-m", "envbuild", "provision", "cpu-reference", "--target", "local",
            "--hosts", hosts or bed["cluster"].hosts, "--identity", str(bed["cluster"].key), "--insecure",
            "--prefix", bed["prefix"], "--wheelhouse", str(WHEELS), "--lock", str(bed["lock"]),
            "--no-smoke", "--no-push-wheels", "--json", *extra]
    t = time.time()
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1500)
    took = time.time() - t
    lines = p.stdout.strip().split("\n")  # JSON Lines: events, then {"type": "result", ...}
    assert lines and '"type": "result"' in lines[-1], p.stdout[-2000:] + p.stderr[-2000:]
    out = json.loads(lines[-1])
    return p.returncode, out, Path(out["run_dir"]), took


def test_torch_runs_on_both_nodes_from_the_reference_layer(bed):
    prefix = bed["prefix"]
    for node in bed["nodes"]:
        r = node.ssh(f"{prefix}/bin/python -c 'import torch; print(float((torch.ones(3, 2) @ torch.ones(2, 4)).sum()))'")
        assert r.stdout.strip().splitlines()[-1] == "24.0"
        assert not (node.upper / prefix.lstrip("/") / "bin/python").exists()  # in the layer, not the node's own
    assert not Path(prefix).exists()  # nothing landed on the host


def test_a_provisioned_node_is_recognised_by_another_controller_and_nothing_changes(bed):
    """This module's controller home has no run of these nodes: what the nodes hold is what
    tells provision that every step is done (the node's observed state, not our records)."""
    rc, out, run, took = provision(bed)
    assert rc == 5  # no smoke: nothing judged (NOT JUDGED, exit 5)
    assert set(out["results"]) == {n.addr for n in bed["nodes"]}
    for host, res in out["results"].items():
        plan = json.loads((run / "nodes" / host / "plan.json").read_text())
        assert res["changed"] == [] and res["skipped"] == [s["id"] for s in plan["steps"]], res
        observed = json.loads((run / "nodes" / host / "observed.json").read_text())
        assert observed["packages"]["torch"].startswith("2.13.0")
    assert took < bed["cold_s"]


def test_one_failing_node_leaves_the_others(bed):
    prefix, bad = bed["prefix"], bed["nodes"][-1]
    bad.ssh(f"rm -f {prefix}/.envbuild/state/env-file.done {prefix}/.envbuild/state/import-check.done "
            f"&& rm -f {prefix}/.envbuild/env.sh && mkdir -p {prefix}/.envbuild/env.sh/blocker")
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
        bad.ssh(f"rm -rf {prefix}/.envbuild/env.sh")


def test_killed_run_resumes_at_first_unfinished_step(bed):
    prefix = bed["prefix"]
    for node in bed["nodes"]:
        node.ssh(f"rm -f {prefix}/.envbuild/state/pip:torch.done {prefix}/.envbuild/state/pip:packages.done "
                 f"{prefix}/.envbuild/state/env-file.done {prefix}/.envbuild/state/import-check.done")
    env = {**os.environ, "ENVBUILD_HOME": str(bed["home"])}
    argv = [sys.executable, "-m", "envbuild", "provision", "cpu-reference", "--target", "local",
            "--hosts", bed["cluster"].hosts, "--identity", str(bed["cluster"].key),
            "--insecure", "--prefix", prefix, "--wheelhouse", str(WHEELS), "--no-smoke",
            "--no-push-wheels", "--lock", str(bed["lock"])]
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
