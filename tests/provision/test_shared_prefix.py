"""A prefix on a file system every node mounts (``Target.shared_prefix``), for real: two
loopback sshd nodes (``envbuild.testbed.sshd``), which share this machine's file system, and
two controllers (own ENVBUILD_HOME and lock folder each) provisioning
cpu-reference onto both nodes at once, into one prefix. One controller installs it through its
first node, while its other node and the whole other controller wait on the lock of the prefix
itself (envbuild/node/prefixhold.py) and then check and use it: nothing fails, nothing is
installed twice, the environment verifies whole. A prefix the target calls shared that a node
does not see (its sshd restarted in a mount namespace with an empty file system over the
prefix's folder) fails on that node, saying so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from envbuild.targets import DATA as TARGETS
from envbuild.testbed import sshd, uvcache

pytestmark = pytest.mark.integration

WHEELS = Path("/opt/wheels")


@pytest.fixture(scope="module")
def bed(module_tmp, remove_tree, cpu_torch_wheels):
    base = module_tmp("shared")
    # the local profile with its prefix shared: shared_prefix is not part of a lock's target
    # digest, so the shipped cpu-reference/local lock is the one it takes
    target = base / "local.yaml"
    profile = yaml.safe_load(Path(TARGETS, "local.yaml").read_text())
    target.write_text(yaml.safe_dump({**profile, "shared_prefix": True}))
    with uvcache.loopback_fleet(base, 2, 60, remove_tree) as nodes:
        yield {"nodes": nodes, "base": base, "target": target}


def start(bed, name: str, prefix: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "envbuild", "provision", "cpu-reference", "--target", str(bed["target"]),
            "--inventory", str(bed["nodes"].inventory_path), "--prefix", prefix, "--wheelhouse", str(WHEELS),
            "--no-smoke", "--json"]
    env = {**os.environ, **bed["nodes"].env, "ENVBUILD_HOME": str(bed["base"] / name / "home"),
           "ENVBUILD_LOCK_DIR": str(bed["base"] / name / "locks"), "ENVBUILD_CACHE_DIR": str(bed["base"] / "cache")}
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def finish(proc: subprocess.Popen) -> tuple[dict, list[dict], str]:
    out, err = proc.communicate(timeout=900)
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    results = [x for x in lines if x.get("type") == "result"]
    assert results, f"no result (rc {proc.returncode}): {err[-3000:]}"
    return results[-1], [x for x in lines if x.get("type") == "event"], err


def run_json(result: dict) -> dict:
    return json.loads((Path(result["run_dir"]) / "run.json").read_text())


def test_two_controllers_two_nodes_one_shared_prefix(bed):
    prefix = str(bed["base"] / "envs" / "shared")
    first = start(bed, "controller-a", prefix)
    time.sleep(1.0)  # controller b starts while a installs
    second = start(bed, "controller-b", prefix)
    (a, a_events, a_err), (b, b_events, b_err) = finish(first), finish(second)
    for res, err in ((a, a_err), (b, b_err)):
        assert res["status"] == "ok", (res, err[-3000:])
        assert {n: r["status"] for n, r in res["results"].items()} == {"node1": "ok", "node2": "ok"}, res["results"]
    # one run installed, through node1 alone; node2 and the other controller used what it made
    installs = [(res, ev) for res, ev in ((a, a_events), (b, b_events))
                if any(e["kind"] == "changed" for e in ev)]
    assert len(installs) == 1, [sorted({(e["host"], e["kind"]) for e in ev}) for ev in (a_events, b_events)]
    (installer, events), = installs
    assert {e["host"] for e in events if e["kind"] == "changed"} == {"node1"}
    assert [e for e in events if e["host"] == "node2" and e["kind"] == "skipped"]
    assert all("(the shared prefix, installed by node1; its smoke ran there)" in e["msg"]
               for e in events if e["host"] == "node2" and e["kind"] == "skipped")
    other, other_events = (b, b_events) if installer is a else (a, a_events)
    assert run_json(other)["ansible"].startswith("not started: every step done")
    waited = [e for e in other_events if e["kind"] == "waiting"]
    assert waited and waited[0]["step"] == "prefix-lock" and "waiting for it" in waited[0]["msg"], other_events[:5]
    assert "is held by run " in waited[0]["msg"]
    # whole, as each node sees it through its own connection (verify: every RECORD hash)
    env = {**os.environ, **bed["nodes"].env, "ENVBUILD_HOME": str(Path(other["run_dir"]).parents[2])}
    v = subprocess.run([sys.executable, "-m", "envbuild", "verify", "--run", other["run_dir"], "--json"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert v.returncode == 0, v.stdout[-2000:] + v.stderr[-2000:]
    seen = sorted((n["node"], n["status"]) for n in json.loads(v.stdout)["nodes"])
    assert seen == [("node1", "clean"), ("node2", "clean")], v.stdout[-2000:]
    holder = json.loads(Path(prefix, ".envbuild", "prefix.lock").read_text())
    assert holder["run"] == Path(other["run_dir"]).name  # the last run that held it


def test_a_shared_prefix_a_node_does_not_see_fails_there(bed):
    """The prefix of the test above (installed there, so node1 finds every step done: one cold
    install serves the module; run alone, node1 installs it here), hidden from node2 (an empty
    file system over it): node1 is ok, node2 fails at the shared-prefix check, saying why."""
    prefix = bed["base"] / "envs" / "shared"
    sshd.hide_folder(bed["nodes"], "node2", prefix)
    res, events, err = finish(start(bed, "controller-c", str(prefix)))
    assert res["results"]["node1"]["status"] == "ok", res["results"]
    node2 = res["results"]["node2"]
    assert node2["status"] == "failed" and node2["failed_step"] == "shared-prefix", node2
    assert "is shared with node1, which installed it, but not as node2 sees it" in node2["log_tail"]
    assert "is the prefix on a file system every node mounts?" in node2["log_tail"]
    assert res["status"] != "ok"
