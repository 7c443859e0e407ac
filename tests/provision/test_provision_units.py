"""Fast tier: host parsing, run directory layout, render output, CLI bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from envbuild import rundir
from envbuild.record import RUN_SCHEMA, create_run
from envbuild.connect.nodes import connection_vars, load_inventory, local_node, parse_hosts
from envbuild.errors import InputError
from envbuild.plan import params as P
from envbuild.plan.model import Plan, Step
from envbuild.render.ansible import render, steps_of


def test_parse_hosts_user_carries_over_and_ports():
    nodes = parse_hosts("root@127.0.0.2:2201,127.0.0.3")
    assert [(n.name, n.user, n.port) for n in nodes] == [("127.0.0.2", "root", 2201), ("127.0.0.3", "root", None)]
    with pytest.raises(InputError):
        parse_hosts("a b")
    with pytest.raises(InputError):
        parse_hosts("h1,h1")


def test_inventory_without_hosts_is_bad_input(tmp_path):
    f = tmp_path / "inv.yaml"
    f.write_text("all:\n  vars: {x: 1}\n")
    with pytest.raises(InputError):
        load_inventory(f)
    f.write_text("all:\n  hosts:\n    n1: {ansible_host: 10.0.0.1, ansible_port: 2222, ansible_user: u}\n")
    (n,) = load_inventory(f)
    assert (n.name, n.host, n.port, n.user) == ("n1", "10.0.0.1", 2222, "u")


def test_run_dir_layout_and_latest(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVBUILD_HOME", str(tmp_path))
    a = create_run("cpu-reference", "local", argv=["envbuild"], hosts=["local"], options={}).rd
    b = create_run("cpu-reference", "local", argv=["envbuild"], hosts=["local"], options={}).rd
    assert a.path != b.path and rundir.latest() is None  # nothing finished yet
    a.publish()
    assert rundir.latest().path == a.path.resolve()
    b.publish()
    assert rundir.latest().path == b.path.resolve()
    run = json.loads((b.path / "run.json").read_text())
    assert run["schema"] == RUN_SCHEMA and run["status"] == "running"
    assert b.run_id.split("-")[2:4] == ["cpu", "reference"]


def test_render_carries_steps_digests_and_actions():
    step = Step(id="env-file", title="e", params=P.EnvFileParams(path="/p/.envbuild/env.sh", vars={"A": "1"}))
    plan = Plan(recipe="r", target="local", host="local", prefix="/p", backend="venv", steps=[step])
    node = local_node()
    r = render({"local": plan}, {"local": connection_vars(node)}, {"local": "/usr/bin:/bin"},
               run_dir="/run", cache_dir="/cache")
    hv = r.inventory["all"]["hosts"]["local"]
    assert hv["ansible_connection"] == "local" and hv["provision_prefix"] == "/p"
    [s] = steps_of(hv)
    assert (s["id"], s["kind"], s["digest"]) == ("env-file", "env_file", step.digest)
    [batch] = s["batches"]
    assert batch["type"] == "node" and batch["actions"][0]["op"] == "write"
    assert batch["record"] is True  # the step's last batch is a node batch: it records the step itself
    assert "export A=1" in batch["actions"][0]["content"]
    assert r.extravars == {"provision_run_dir": "/run", "provision_cache_dir": "/cache"}
    # a step with no node batch last (here: none at all) carries no record flag: the role records it
    bare = Step(id="preflight", title="p", params=P.PreflightParams(feasible=True))
    [only] = steps_of(render({"local": plan.model_copy(update={"steps": [bare]})}, {"local": connection_vars(node)},
                             {"local": "/usr/bin:/bin"}, run_dir="/run", cache_dir="/cache")
                      .inventory["all"]["hosts"]["local"])
    assert only["batches"] == []
    # every string of the inventory file is tagged !unsafe; the steps are one JSON string
    text = r.inventory_text()
    assert "provision_plan_json: !unsafe" in text and "provision_prefix: !unsafe '/p'" in text


@pytest.mark.integration
def test_cli_missing_wheelhouse_is_exit_2(tmp_path):
    p = subprocess.run([sys.executable, "-m", "envbuild", "provision", "--target", "local",
                        "--wheelhouse", str(tmp_path / "nope"), "--dry-run"], capture_output=True,
                       text=True, env={"ENVBUILD_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 2
    assert p.stderr.startswith("error: --wheelhouse") and "hint:" in p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize("prefix", ["/", "/usr", "/usr/local/", "/root", "~", "/opt/envs/../../etc"])
def test_a_system_folder_or_a_path_that_goes_up_is_refused_as_a_prefix(prefix, tmp_path):
    from support.clirun import envbuild as run_envbuild

    for argv in (["plan", "cpu-reference", "-t", "local", "--prefix", prefix],
                 ["provision", "--target", "local", "--prefix", prefix, "--dry-run"]):
        p = run_envbuild(*argv, env={**os.environ, "ENVBUILD_HOME": str(tmp_path / "home")})
        assert p.returncode == 2 and f"--prefix {prefix}:" in p.stderr and "hint:" in p.stderr, (argv, p.stderr)
    assert not (tmp_path / "home" / "runs").exists()  # nothing half-written


def test_a_stop_is_recorded_even_when_its_display_is_a_closed_pipe(tmp_path, monkeypatch):
    """``envbuild provision --json | head``: the reader is gone, so showing the stop's event raises
    BrokenPipeError. The run is still recorded as interrupted, never left "running"."""
    import signal

    from envbuild.execute.events import EventSink
    from envbuild.interrupt import Interrupted
    from envbuild.provision.results import NodeResults, record_stopped

    rd = create_run("r", "local", argv=["envbuild"], hosts=["local"], options={}, home=tmp_path).rd
    read, write = os.pipe()
    os.close(read)
    closed = os.fdopen(write, "w")
    monkeypatch.setattr(sys, "stdout", closed)
    try:
        record_stopped(rd, EventSink(rd.events, json_lines=True), NodeResults(rd, {"local": False}), ["local"],
                       "facts", Interrupted(signal.SIGINT))
    finally:
        monkeypatch.undo()
        try:
            closed.close()
        except BrokenPipeError:
            pass
    meta = json.loads((rd.path / "run.json").read_text())
    assert meta["status"] == "interrupted" and meta["interrupted_at"] == {"local": "facts"}, meta
    node = json.loads((rd.path / "nodes" / "local" / "result.json").read_text())
    assert node["status"] == "interrupted", node
    assert "its event was not shown: BrokenPipeError" in node["log_tail"], node
