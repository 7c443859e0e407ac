"""envbuild verify end to end on real loopback sshd nodes, each with its own real venv.

A run directory records the expected state (lock + plan + observed baseline) of three nodes;
verify re-observes them over SSH (Fabric): a clean fleet exits 0, a package changed on one node
names that node alone and exits 1, an unreachable node exits 3.
"""

from __future__ import annotations

import json
import sys

import pytest
import yaml

from envbuild.cli import main
from envbuild.testbed.sshd import free_port
from support.observed import make_env, observe_local, sh

pytestmark = pytest.mark.integration

RUN_ID = "20261122-090000-tiny-local"


@pytest.fixture(scope="module")
def fleet(module_tmp, ssh_nodes):
    """The shared sshd nodes, a venv per node, and a run directory that expects what is installed."""
    root = module_tmp("verify")
    home = root / "home"
    run = home / "runs" / RUN_ID
    bed = ssh_nodes
    names = [n.name for n in bed.nodes]
    lock = None
    for node in bed.nodes:
        lock, plan = make_env(root / node.name, {"six": "1.16.0", "idna": "3.10"})
        plan["host"] = node.name
        baseline = observe_local(plan).model_dump(by_alias=True)
        node_dir = run / "nodes" / node.name
        node_dir.mkdir(parents=True)
        (node_dir / "plan.json").write_text(json.dumps(plan))
        (node_dir / "observed.json").write_text(json.dumps(baseline))
        (node_dir / "result.json").write_text(json.dumps({"status": "ok"}))
    # the per-node git SHAs differ (each node has its own tree): pin them per node in the plan only
    lock.pop("git")
    (run / "lock.lock").write_text("# DO NOT EDIT\n" + yaml.safe_dump(lock))
    (run / "run.json").write_text(json.dumps({"schema": "envbuild.run/1", "run_id": RUN_ID, "recipe": "tiny",
                                              "target": "local", "status": "ok", "hosts": names,
                                              "lock_digest": "0" * 64}))
    (home / "runs" / "latest").symlink_to(RUN_ID)
    yield {"bed": bed, "run": run, "home": home, "root": root}


def verify_json(fleet, monkeypatch, capsys, *args) -> tuple[int, dict, str]:
    monkeypatch.setenv("ENVBUILD_HOME", str(fleet["home"]))
    code = main(["verify", "--json", *args])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_clean_fleet_exits_0(fleet, monkeypatch, capsys):
    code, out, _ = verify_json(fleet, monkeypatch, capsys, "--inventory", str(fleet["bed"].inventory_path))
    assert code == 0, out
    assert [(n["node"], n["status"], n["drift"]) for n in out["nodes"]] == [
        ("node1", "clean", []), ("node2", "clean", []), ("node3", "clean", [])]
    assert out["nodes"][0]["fingerprint"] and out["run"] == str(fleet["run"].resolve())


def test_changed_package_on_one_node_names_that_node(fleet, monkeypatch, capsys):
    python = fleet["root"] / "node2" / "env" / "bin" / "python"
    sh(sys.executable, "-m", "uv", "pip", "install", "-q", "--python", python, "six==1.17.0")
    try:
        code, out, err = verify_json(fleet, monkeypatch, capsys, "--inventory", str(fleet["bed"].inventory_path))
        assert code == 1
        status = {n["node"]: n for n in out["nodes"]}
        assert status["node1"]["status"] == status["node3"]["status"] == "clean"
        assert status["node2"]["status"] == "drift"
        assert [(d["kind"], d["subject"], d["expected"], d["observed"]) for d in status["node2"]["drift"]] == [
            ("package-version", "six", "1.16.0", "1.17.0")]
        assert "error: drift on 1 node(s): node2" in err and "hint:" in err
    finally:
        sh(sys.executable, "-m", "uv", "pip", "install", "-q", "--python", python, "six==1.16.0")


def test_hosts_option_and_table_output(fleet, monkeypatch, capsys):
    bed = fleet["bed"]
    node = bed.nodes[0]
    inv = fleet["root"] / "one.yaml"
    inv.write_text(yaml.safe_dump({"all": {"hosts": {node.name: {
        "ansible_host": node.host, "ansible_port": node.port, "ansible_user": node.user,
        "ansible_ssh_private_key_file": node.key_path}}}}))
    monkeypatch.setenv("ENVBUILD_HOME", str(fleet["home"]))
    assert main(["verify", "--inventory", str(inv), "--known-hosts", str(bed.known_hosts)]) == 0
    out = capsys.readouterr().out
    assert "node1" in out and "clean" in out


def test_host_keys_checked_and_insecure_recorded(fleet, monkeypatch, capsys, tmp_path):
    node = fleet["bed"].nodes[2]
    inv = tmp_path / "unknown.yaml"  # no UserKnownHostsFile: ~/.ssh/known_hosts (empty HOME) knows nothing
    inv.write_text(yaml.safe_dump({"all": {"hosts": {node.name: {
        "ansible_host": node.host, "ansible_port": node.port, "ansible_user": node.user,
        "ansible_ssh_private_key_file": node.key_path}}}}))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("ENVBUILD_KNOWN_HOSTS", raising=False)
    code, out, err = verify_json(fleet, monkeypatch, capsys, "--inventory", str(inv))
    (verdict,) = out["nodes"]
    assert code == 3 and verdict["status"] == "unreachable" and verdict["insecure"] is False
    assert f"host key of [{node.host}]:{node.port} is unknown" in verdict["message"]
    assert "ssh-keyscan" in verdict["message"] and "--insecure" in verdict["message"]
    code, out, err = verify_json(fleet, monkeypatch, capsys, "--inventory", str(inv), "--insecure")
    (verdict,) = out["nodes"]
    assert code == 0 and verdict["status"] == "clean" and verdict["insecure"] is True
    assert "SSH host key NOT checked" in err


def test_unreachable_node_exits_3(fleet, monkeypatch, capsys):
    node = fleet["bed"].nodes[0]
    inv = fleet["root"] / "down.ini"
    inv.write_text(f"[nodes]\nnode1 ansible_host={node.host} ansible_port={free_port(node.host)} "
                   f"ansible_user={node.user} ansible_ssh_private_key_file={node.key_path}\n")
    code, out, err = verify_json(fleet, monkeypatch, capsys, "--inventory", str(inv))
    assert code == 3
    assert out["nodes"][0]["status"] == "unreachable"
    assert "could not observe: node1" in err and "hint:" in err


def test_local_verify_and_missing_run(fleet, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("ENVBUILD_HOME", str(tmp_path))
    assert main(["verify", "--local"]) == 2
    assert "no run directory" in capsys.readouterr().err
    monkeypatch.setenv("ENVBUILD_HOME", str(fleet["home"]))
    # the run has two nodes; --local cannot guess which one this machine is
    assert main(["verify", "--local"]) == 2
    assert "the run has nodes: node1, node2, node3" in capsys.readouterr().err
