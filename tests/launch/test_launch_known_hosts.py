"""``envbuild launch --submit`` verifies a provision run's nodes the way the provision reached
them: with its SSH key and its known_hosts file, host keys checked strictly.

The node is a real loopback sshd (``envbuild.testbed.sshd``, a bed of its own) whose client
key and host key are in none of ssh's default places: the key is the bed's own file (not
``~/.ssh/id_*``; the node authorises only it), the host key is only in the bed's known_hosts
file (not ``~/.ssh/known_hosts``, not ``/etc/ssh/ssh_known_hosts``) and ``ENVBUILD_KNOWN_HOSTS``
is unset. The inventory names the node's address, user and Python, not its key nor its
known_hosts: cpu-reference is provisioned there for real (``--inventory INV -i KEY
--known-hosts FILE``, from /opt/wheels); run.json records the three paths (``selection``),
never the key's contents. Then:

* with ssh's defaults (what ``launch --submit`` used before: the run's nodes, ssh's own key
  and known_hosts) the node is refused: its host key is unknown;
* ``launch --submit`` (the local scheduler) verifies the node with the recorded key and
  known_hosts (clean), runs the recipe's benchmark and names the node the job ran on;
* the node gets a new host key (a reinstalled host, or an impostor): ``launch --submit``
  refuses to submit (exit 3, the host key CHANGED) and makes no run: the check stayed strict.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.cli import main
from envbuild.connect.runners import SshRunner
from envbuild.connect.selection import NodeSelection
from envbuild.record import RunRecord
from envbuild.testbed import sshd
from envbuild.verify import verify

pytestmark = pytest.mark.integration

WHEELS = Path("/opt/wheels")
DEFAULT_KNOWN_HOSTS = [Path("~/.ssh/known_hosts").expanduser(), Path("/etc/ssh/ssh_known_hosts")]


@pytest.fixture(scope="module")
def provisioned(module_tmp, remove_tree):
    """(bed, run directory, home): cpu-reference provisioned onto one sshd node with the bed's
    key and known_hosts file given on the command line."""
    if not any(WHEELS.glob("torch-2.13.0*cp311*.whl")):
        pytest.skip("no torch 2.13.0 cp311 wheel in /opt/wheels")
    base = module_tmp("launch-known-hosts")
    # the node's uv cache is its own (see envbuild.testbed.uvcache), removed with the environment
    with sshd.ssh_nodes(1, first_address=80, session_env={"UV_CACHE_DIR": str(base / "uv-cache")}) as bed:
        [node] = bed.nodes
        # the premise: nothing of this node is where ssh looks by default
        for path in DEFAULT_KNOWN_HOSTS:
            assert not path.is_file() or f"[{node.host}]:{node.port}" not in path.read_text()
        assert not str(node.key_path).startswith(str(Path("~/.ssh").expanduser()))
        inventory = base / "nodes.ini"  # where the node is and its Python; no key, no known_hosts
        inventory.write_text(f"[nodes]\n{node.name} ansible_host={node.host} ansible_port={node.port} "
                             f"ansible_user={node.user} ansible_python_interpreter=/usr/bin/python3\n")
        env = {k: v for k, v in os.environ.items() if k != "ENVBUILD_KNOWN_HOSTS"}
        env["ENVBUILD_HOME"] = str(base / "home")
        p = subprocess.run([sys.executable, "-m", "envbuild", "provision", "cpu-reference", "--target", "local",
                            "--inventory", str(inventory), "-i", node.key_path, "--known-hosts", str(bed.known_hosts),
                            "--prefix", str(base / "env"), "--wheelhouse", str(WHEELS), "--json"],
                           capture_output=True, text=True, env=env, timeout=1500)
        result = json.loads(p.stdout.strip().splitlines()[-1])
        assert result["type"] == "result", p.stderr[-3000:]
        assert result["results"][node.name]["status"] == "ok", (result["results"], p.stderr[-3000:])
        yield bed, Path(result["run_dir"]), base / "home"
    remove_tree(base / "env")
    remove_tree(base / "uv-cache")


@pytest.fixture
def strict(provisioned, monkeypatch):
    """This process as a user with no known_hosts of the node: ENVBUILD_KNOWN_HOSTS unset."""
    bed, run, home = provisioned
    monkeypatch.delenv("ENVBUILD_KNOWN_HOSTS", raising=False)
    monkeypatch.setenv("ENVBUILD_HOME", str(home))
    return bed, run, home


def test_the_provision_records_how_it_reached_the_node(strict) -> None:
    bed, run, _ = strict
    [node] = bed.nodes
    record = json.loads((run / "run.json").read_text())
    sel = record["selection"]
    assert sel["inventory"].endswith("nodes.ini") and sel["hosts"] is None and sel["identity_file"] == node.key_path
    assert sel["known_hosts"] == [str(bed.known_hosts)] and sel["insecure"] is False
    key = Path(node.key_path).read_text()
    secret = key.split("-----")[2].strip().splitlines()[1]  # a line of the private key's body
    assert secret not in (run / "run.json").read_text()
    assert RunRecord.load(run).selection == NodeSelection.model_validate(sel)  # typed where run.json is read


def test_ssh_defaults_do_not_reach_the_node(strict) -> None:
    """What launch --submit did before: the run's nodes with ssh's default key and known_hosts."""
    _, run, _ = strict
    record = json.loads((run / "run.json").read_text())
    [verdict] = verify(run, [SshRunner(n) for n in NodeSelection(inventory=record["selection"]["inventory"]).nodes()])
    assert [verdict.node] == record["hosts"] and verdict.status == "unreachable"
    assert "host key" in verdict.message and "unknown" in verdict.message


def test_launch_verifies_with_the_provisions_key_then_refuses_a_changed_host_key(strict, capsys) -> None:
    bed, run, home = strict
    [node] = bed.nodes
    args = ["launch", "cpu-reference", "-t", "local", "--scheduler", "local", "--submit", "--json",
            "--run", str(run), "--timeout", "300"]
    rc = main(args)
    captured = capsys.readouterr()
    res = json.loads(captured.out)
    assert res["job"]["state"] == "COMPLETED", captured.err
    launch = json.loads((Path(res["run"]) / "launch.json").read_text())
    [verified] = launch["verified"]
    assert verified["node"] == node.name and verified["status"] == "clean" and verified["insecure"] is False
    assert launch["provisioned_run"] == str(run)
    # the job ran here, not on the node: named as this machine, its results under its own name
    here = socket.gethostname()
    assert res["nodes"] == [here] and res["node_dir"] == here
    assert sorted(p.name for p in (Path(res["run"]) / "nodes").iterdir()) == sorted([node.name, here])
    # the job's run carries the provision's selection: verify of it reaches the node the same way
    assert json.loads((Path(res["run"]) / "run.json").read_text())["selection"]["identity_file"] == node.key_path
    assert main(["verify", "--run", res["run"], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["nodes"][0]["status"] == "clean"
    assert rc == {"PASS": 0, "FAIL": 1}[res["status"]]  # the job's own verdict: cpu-reference's floor

    runs = sorted(p.name for p in (home / "runs").iterdir())
    sshd.rekey(bed, node.name)  # the node now offers a host key the provision's file does not hold
    assert main(args) == 3
    err = capsys.readouterr().err
    assert "not submitting: could not verify" in err and "CHANGED" in err
    assert sorted(p.name for p in (home / "runs").iterdir()) == runs  # nothing ran
