"""One node whose prefix cannot be locked fails alone (issue 54, item 8; a regression since
d31ca30, where the fleet's other nodes went on): the lock on the prefix itself refused on one
node (its ``.envbuild/prefix.lock`` is a folder, as a file system without locks refuses it),
or its prefix held by another run, leaves that node failed at ``prefix-lock`` with the reason
and the others provisioned; only when no node can be locked does the run stop (exit 3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from envbuild.connect.nodes import Node
from envbuild.errors import EnvironmentProblem
from envbuild.execute import prefixlock

RECIPE = {"schema": 1, "name": "lock-alone", "title": "one node's lock refused", "description": "an empty venv",
          "published": {"url": "https://example.invalid/lock-alone"}, "python": "3.11", "targets": ["local"],
          "environment": {"kind": "venv"}}


def test_on_nodes_leaves_out_a_prefix_that_cannot_be_locked(tmp_path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    (bad / ".envbuild" / "prefix.lock").mkdir(parents=True)  # open() fails: the node refuses the lock
    n1, n2 = Node(name="n1", connection="local"), Node(name="n2", connection="local")
    with prefixlock.on_nodes([prefixlock.Claim(n1, str(good)), prefixlock.Claim(n2, str(bad))], "run-a",
                             alone=True) as hold:
        assert [(c.node.name, "cannot lock" in e.message) for c, e in hold.failed] == [("n2", True)]
        assert json.loads((good / ".envbuild" / "prefix.lock").read_text())["run"] == "run-a"  # the other holds
    with pytest.raises(EnvironmentProblem, match="n2: cannot lock"):  # without alone: the run stops, as before
        with prefixlock.on_nodes([prefixlock.Claim(n1, str(good)), prefixlock.Claim(n2, str(bad))], "run-b"):
            pass
    with pytest.raises(EnvironmentProblem, match="n2: cannot lock"):  # alone, but no node could be locked
        with prefixlock.on_nodes([prefixlock.Claim(n2, str(bad))], "run-c", alone=True):
            pass


def test_held_leaves_out_a_node_another_run_holds(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ENVBUILD_LOCK_DIR", str(tmp_path / "locks"))
    n1, n2 = Node(name="n1", connection="local"), Node(name="n2", connection="local")
    with prefixlock.held([(n2, str(tmp_path / "b"))], "other"):
        with prefixlock.held([(n1, str(tmp_path / "a")), (n2, str(tmp_path / "b"))], "mine", alone=True) as busy:
            assert list(busy) == ["n2"] and "is being provisioned by run other" in busy["n2"].message
        with pytest.raises(EnvironmentProblem, match="being provisioned by run other"):
            with prefixlock.held([(n2, str(tmp_path / "b"))], "mine", alone=True):
                pass


@pytest.mark.integration
def test_a_fleet_with_one_unlockable_prefix_provisions_the_others(tmp_path) -> None:
    recipe = tmp_path / "lock-alone.yaml"
    recipe.write_text(yaml.safe_dump(RECIPE, sort_keys=False))
    node = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"n1": node, "n2": node, "n3": node}}}))
    envs = tmp_path / "envs"
    (envs / "n2" / ".envbuild" / "prefix.lock").mkdir(parents=True)
    p = subprocess.run([sys.executable, "-m", "envbuild", "provision", "--target", "local", "--recipe", str(recipe),
                        "--inventory", str(inventory), "--prefix", f"{envs}/{{node}}", "--no-smoke", "--json"],
                       capture_output=True, text=True, timeout=600,
                       env={**os.environ, "ENVBUILD_HOME": str(tmp_path / "home"),
                            "ENVBUILD_LOCK_DIR": str(tmp_path / "locks")})
    lines = [json.loads(line) for line in p.stdout.splitlines()]
    assert lines and lines[-1].get("type") == "result", p.stdout[-2000:] + p.stderr[-2000:]
    res = lines[-1]["results"]
    assert {n: (r["status"], r["failed_step"]) for n, r in res.items()} == {
        "n1": ("ok", None), "n2": ("failed", "prefix-lock"), "n3": ("ok", None)}, p.stderr[-2000:]
    assert "n2: cannot lock" in res["n2"]["log_tail"] and "Is a directory" in res["n2"]["log_tail"]
    assert p.returncode == 4  # README: a node failed (3 only when no node could be locked)
    assert any(e.get("host") == "n2" and e.get("step") == "prefix-lock" and e.get("kind") == "failed" for e in lines)
    assert (envs / "n1" / ".envbuild" / "env.sh").is_file() and (envs / "n3" / ".envbuild" / "env.sh").is_file()
    assert not (envs / "n2" / ".envbuild" / "env.sh").exists()  # nothing ran there
    hosts = yaml.safe_load(next((tmp_path / "home" / "runs").glob("*-lock-alone-local/ansible/inventory/hosts.yml"))
                           .read_text().replace("!unsafe", ""))["all"]["hosts"]
    assert sorted(hosts) == ["n1", "n3"]  # the playbook ran on the others only
