"""A fleet of four real loopback sshd nodes (``envbuild.testbed.sshd``), cpu-reference, and the
faults a fleet meets, all in one cold provision:

* node4 is unreachable at the start (its sshd is down);
* node2 dies in the middle of provisioning: its sshd and its session (pip included) are killed
  while its ``pip:torch`` step runs;
* a step fails on node3 only (its env file's path is taken by a folder);
* node1 has none of these and finishes.

The wheels are downloaded once on the controller (run.json's ``fleet``: the bytes taken from
the index are those of the distinct files, whatever the number of nodes) and pushed. The report
names each node's status and failed step. After the faults are gone, a rerun touches only what
is missing: nothing on node1, node2 from the step it died in, node3 from its failed step,
everything on node4. (The controller interrupted mid-run: tests/provision/test_provision_chroot.py
``test_killed_run_resumes_at_first_unfinished_step`` and tests/provision/test_provision_interrupt.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from envbuild.testbed import sshd, uvcache

pytestmark = pytest.mark.integration

WHEELS = Path("/opt/wheels")


@pytest.fixture(scope="module")
def bed(module_tmp, remove_tree, cpu_torch_wheels):
    base = module_tmp("fleet")
    with uvcache.loopback_fleet(base, 4, 40, remove_tree) as nodes:
        yield {"nodes": nodes, "base": base, "home": base / "home", "cache": base / "cache",
               "envs": base / "envs"}


def provision(bed, on_event=None):
    """``envbuild provision`` of cpu-reference onto the bed's inventory; (result, events)."""
    argv = [sys.executable, "-m", "envbuild", "provision", "cpu-reference", "--target", "local",
            "--inventory", str(bed["nodes"].inventory_path), "--prefix", f"{bed['envs']}/{{node}}",
            "--wheelhouse", str(WHEELS), "--no-smoke", "--json"]
    env = {**os.environ, **bed["nodes"].env, "ENVBUILD_HOME": str(bed["home"]),
           "ENVBUILD_CACHE_DIR": str(bed["cache"])}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)
    reader.start()
    events, result = [], None
    for line in proc.stdout:
        obj = json.loads(line)
        if obj.get("type") == "result":
            result = obj
            continue
        events.append(obj)
        if on_event is not None:
            on_event(obj)
    proc.wait(timeout=60)
    reader.join(timeout=10)
    assert result is not None, f"no result (rc {proc.returncode}): {''.join(err)[-2000:]}"
    return result, events


def test_faults_then_a_rerun_touches_only_what_is_missing(bed):
    nodes = bed["nodes"]
    sshd.kill_node(nodes, "node4")  # unreachable at the start
    blocker = bed["envs"] / "node3" / ".envbuild" / "env.sh"
    blocker.mkdir(parents=True)  # the env-file step cannot write its file on node3
    killed: list[int] = []

    def kill_node2_in_torch(ev):
        if ev.get("host") == "node2" and ev.get("step") == "pip:torch" and ev.get("kind") == "start" and not killed:
            time.sleep(1.0)  # pip has started on the node
            killed.extend(sshd.kill_node(nodes, "node2"))

    first, _events = provision(bed, on_event=kill_node2_in_torch)
    res = first["results"]
    assert killed, "node2 never started pip:torch"
    assert res["node1"]["status"] == "ok", res["node1"]
    assert res["node4"]["status"] == "unreachable" and res["node4"]["failed_step"] is None
    assert res["node2"]["status"] in ("unreachable", "failed") and res["node2"]["failed_step"] == "pip:torch", res["node2"]
    assert res["node3"]["status"] == "failed" and res["node3"]["failed_step"] == "env-file", res["node3"]
    assert first["exit_code"] != 0

    run_dir = Path(first["run_dir"])
    run = json.loads((run_dir / "run.json").read_text())
    fleet = run["fleet"]
    assert fleet["pushed"] is True and fleet["nodes"] == 3  # node4 was unreachable at the start
    lock = yaml.safe_load((run_dir / "lock.lock").read_text())
    from_index = {p["dist"]["filename"]: p["dist"] for p in [*lock.get("tooling", []), *lock["packages"]]
                  if p.get("dist") and p["dist"]["url"].startswith("https://") and not p.get("wheelhouse")}
    downloaded = {f for f, o in fleet["origins"].items() if o == "download"}
    assert downloaded == set(from_index)  # each file once, whatever the number of nodes
    cache_bytes = sum(f.stat().st_size for f in (bed["cache"] / "dists").rglob("*") if f.is_file())
    assert fleet["downloaded_bytes"] == cache_bytes > 0

    rep = subprocess.run([sys.executable, "-m", "envbuild", "report", str(run_dir), "--format", "md"],
                         capture_output=True, text=True, env={**os.environ, "ENVBUILD_HOME": str(bed["home"])})
    assert rep.returncode == 1, rep.stderr  # FAIL: three nodes did not finish
    report = rep.stdout
    section = report.split("## Fleet", 1)[1].split("\n## ", 1)[0]
    fleet_rows = {line.split("|")[1].strip(): line for line in section.splitlines() if line.startswith("| node")}
    assert "pip:torch" in fleet_rows["node2"] and "env-file" in fleet_rows["node3"]
    assert "unreachable" in fleet_rows["node4"] and "ok" in fleet_rows["node1"]

    # the faults are gone: node2 and node4 are back, node3's path is free
    sshd.restart_node(nodes, "node2")
    sshd.restart_node(nodes, "node4")
    blocker.rmdir()
    second, _ = provision(bed)
    res2 = second["results"]
    assert {r["status"] for r in res2.values()} == {"ok"}, res2
    assert second["exit_code"] == 5  # --no-smoke: every node ok, nothing judged (NOT JUDGED, exit 5)
    plan = json.loads((Path(second["run_dir"]) / "nodes" / "node4" / "plan.json").read_text())
    plan_ids = [s["id"] for s in plan["steps"]]
    assert res2["node1"]["changed"] == []
    assert res2["node2"]["changed"] == plan_ids[plan_ids.index("pip:torch"):]
    assert res2["node3"]["changed"] == plan_ids[plan_ids.index("env-file"):]
    assert res2["node4"]["changed"] == res["node1"]["changed"]  # all of a cold run, as node1's first
    run2 = json.loads((Path(second["run_dir"]) / "run.json").read_text())
    assert run2["fleet"]["downloaded_bytes"] == 0  # every file already on the controller
