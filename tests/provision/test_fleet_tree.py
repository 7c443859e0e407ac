"""``provision --fanout``: a fleet's wheels archive down a tree of three real loopback sshd nodes
(``envbuild.testbed.sshd``), two provisions of tests/data/fleet_mini.yaml (cpu-reference's small
wheels without torch: the tree's hops are the same, each moves and checks a small archive):

1. ``--fanout 1`` with no way for one node to log in to the next (the nodes' own SSH setup
   has no key the others accept): node1, the root, takes the controller's copy; node2's
   holder (node1) cannot log in to node2, so node2 takes the controller's copy, and so does
   node3; every node says why, and every node is provisioned.
2. node2's and node3's kept copies removed, ``--fanout 1 --node-identity KEY`` (a key at that
   path on the nodes, which the others accept) and ``--from-step wheels``: node1 keeps its
   checked copy, node1 sends node2 its copy, node2 sends node3 its copy (a chain), each copy's
   sha256 checked, and the controller sends nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.testbed import uvcache
from support.paths import DATA

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def bed(module_tmp, remove_tree):
    base = module_tmp("fleet-tree")
    with uvcache.loopback_fleet(base, 3, 70, remove_tree) as nodes:
        yield {"nodes": nodes, "base": base, "envs": base / "envs"}


def provision(bed, *extra: str) -> dict:
    argv = [sys.executable, "-m", "envbuild", "provision", str(DATA / "fleet_mini.yaml"), "--target", "local",
            "--inventory", str(bed["nodes"].inventory_path), "--prefix", f"{bed['envs']}/{{node}}",
            "--no-smoke", "--json", "--fanout", "1", *extra]
    env = {**os.environ, **bed["nodes"].env, "ENVBUILD_HOME": str(bed["base"] / "home"),
           "ENVBUILD_CACHE_DIR": str(bed["base"] / "cache")}
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    result = next((x for x in lines if x.get("type") == "result"), None)
    assert result is not None, f"no result (rc {proc.returncode}): {proc.stderr[-2000:]}"
    return result


def kept(bed, node: str, sha256: str) -> Path:
    (copy,) = (bed["envs"] / node / ".envbuild" / "fleet").glob("*.tar")
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == sha256
    return copy


def test_the_archive_goes_down_the_tree_and_a_node_its_holder_cannot_reach_takes_the_controllers(bed):
    first = provision(bed)
    res = first["results"]
    assert {r["status"] for r in res.values()} == {"ok"}, res
    run = json.loads((Path(first["run_dir"]) / "run.json").read_text())
    tree = run["fleet"]["tree"]
    assert tree["fanout"] == 1 and tree["holders"] == {"node1": None, "node2": "node1", "node3": "node2"}
    assert res["node1"]["fleet_from"] == "controller (the tree's root)"
    for node, holder in (("node2", "node1"), ("node3", "node2")):
        # the holder ran scp and could not log in (BatchMode: no password asked)
        assert res[node]["fleet_from"].startswith(f"controller ({holder}: "), res[node]
        assert "Permission denied" in res[node]["fleet_from"], res[node]
        kept(bed, node, tree["sha256"])

    for node in ("node2", "node3"):
        for f in (bed["envs"] / node / ".envbuild" / "fleet").glob("*.tar*"):  # the copy and its .ok
            f.unlink()
    second = provision(bed, "--node-identity", str(bed["nodes"].key_path), "--from-step", "wheels")
    res2 = second["results"]
    assert {r["status"] for r in res2.values()} == {"ok"}, res2
    assert res2["node1"]["fleet_from"] == "kept (its checked copy of an earlier run)"
    assert res2["node2"]["fleet_from"] == "node1" and res2["node3"]["fleet_from"] == "node2", res2
    for node in ("node1", "node2", "node3"):
        assert "wheels" in res2[node]["changed"]
        kept(bed, node, tree["sha256"])
    ran = {}  # (task, host) -> what ansible-runner recorded of it
    for path in (Path(second["run_dir"]) / "ansible" / "artifacts").rglob("job_events/*.json"):
        event = json.loads(path.read_text())
        data = event.get("event_data") or {}
        if event["event"] in ("runner_on_ok", "runner_on_skipped", "runner_on_failed"):
            ran[(data.get("task"), data.get("host"))] = event["event"]
    for node in ("node1", "node2", "node3"):  # the controller sent no copy at all
        assert ran[("Copy the archive from the controller", node)] == "runner_on_skipped"
    assert ran[("Envbuild holder sends its copy to this node", "node2")] == "runner_on_ok"
    assert ran[("Envbuild holder sends its copy to this node", "node3")] == "runner_on_ok"
