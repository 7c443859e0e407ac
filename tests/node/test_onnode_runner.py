"""The node runner (envbuild.node.actions) under signals, and its build log as it runs.

Real processes: a runner (``python -c`` calling ``run_actions``) starts a long command in its
own process group; the runner is signalled, and the command's whole group must be gone.
The live tail (envbuild.execute.livelog) reads the log the runner writes while the command
still runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from envbuild.execute.livelog import LiveTail, log_paths
from envbuild.node import actions as node_actions
from support.paths import ROOT

pytestmark = pytest.mark.process

RUNNER = ("import json, sys; sys.path.insert(0, sys.argv[1]); from envbuild.node import actions; "
          "actions.run_actions(json.loads(sys.argv[2]))")


def alive(pid: int) -> bool:
    """Running (a zombie left to an init that does not reap counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def group_members(pgid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                out.append(int(entry))
    return out


def start_runner(tmp_path: Path, script: str) -> tuple[subprocess.Popen, int]:
    pidfile = tmp_path / "pid"
    acts = [{"op": "run", "argv": ["sh", "-c", script, "sh", str(pidfile)]}]
    runner = subprocess.Popen([sys.executable, "-c", RUNNER, str(ROOT), json.dumps(acts)])
    deadline = time.time() + 20
    while time.time() < deadline and not (pidfile.exists() and pidfile.read_text().strip()):
        time.sleep(0.05)
    assert pidfile.exists(), "the command never started"
    pgid = int(pidfile.read_text())
    deadline = time.time() + 5
    while time.time() < deadline and len(group_members(pgid)) < 2:
        time.sleep(0.05)
    return runner, pgid


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signalled_runner_takes_its_commands_process_group_with_it(tmp_path, sig):
    # the command leads its own group (start_new_session) and starts a child of its own
    runner, pgid = start_runner(tmp_path, 'echo $$ > "$1"; sleep 300 & sleep 300')
    members = group_members(pgid)
    assert len(members) >= 2, members
    runner.send_signal(sig)
    rc = runner.wait(timeout=30)
    assert rc != 0  # the runner ends by the signal (or KeyboardInterrupt for SIGINT), never "ok"
    deadline = time.time() + 10
    while time.time() < deadline and any(alive(p) for p in members):
        time.sleep(0.05)
    assert not [p for p in members if alive(p)], "the command's group outlived the runner"


def test_a_runner_killed_outright_takes_its_command_through_pdeathsig(tmp_path):
    if node_actions._PRCTL is None:
        pytest.skip("no prctl here (not Linux, or no ctypes)")
    runner, pgid = start_runner(tmp_path, 'echo $$ > "$1"; exec sleep 300')
    runner.kill()  # SIGKILL: no handler runs
    runner.wait(timeout=30)
    deadline = time.time() + 10
    while time.time() < deadline and alive(pgid):
        time.sleep(0.05)
    assert not alive(pgid), "the command outlived a runner killed with SIGKILL"


def test_handlers_are_restored_after_the_actions():
    before = signal.getsignal(signal.SIGTERM)
    node_actions.run_actions([{"op": "run", "argv": ["true"]}])
    assert signal.getsignal(signal.SIGTERM) is before


def test_the_build_log_grows_while_the_command_runs_and_is_tailed(tmp_path):
    log = tmp_path / "state" / "logs" / "pip-x.log"
    gate = tmp_path / "gate"
    script = ('echo "Collecting one"; echo "warning on stderr" >&2; '
              f'while [ ! -e {gate} ]; do sleep 0.05; done; echo "Installed $((1 + 1))"')  # not in the "$ cmd" line
    events = []
    tail = LiveTail({"local": {str(log): "pip:x"}}, events.append, interval=0.05)
    result = {}
    worker = threading.Thread(target=lambda: result.update(node_actions.run_actions(
        [{"op": "run", "argv": ["sh", "-c", script], "log": str(log)}])))
    with tail:
        worker.start()
        deadline = time.time() + 20
        while time.time() < deadline and not any("warning on stderr" in e.msg for e in events):
            time.sleep(0.05)
        seen = "\n".join(e.msg for e in events)
        assert "Collecting one" in seen and "warning on stderr" in seen  # while it still runs
        assert worker.is_alive() and "Installed 2" not in seen
        gate.touch()
        worker.join(timeout=20)
        deadline = time.time() + 5
        while time.time() < deadline and not any("Installed 2" in e.msg for e in events):
            time.sleep(0.05)
    assert all(e.kind == "output" and e.host == "local" and e.step == "pip:x" for e in events)
    assert any("Installed 2" in e.msg for e in events)
    text = log.read_text()
    assert text.splitlines()[0].startswith("$ sh -c") and "Installed 2" in text
    assert "Collecting one" in "\n".join(result["log"])  # the step's log keeps the stdout tail


def test_log_paths_name_each_steps_long_commands():
    from envbuild.plan import params as P
    from envbuild.plan.model import Plan, Step

    reqs = [P.Requirement(name="a", version="1", requirement="a==1", hashes=["ab" * 32])]
    plan = Plan(recipe="r", target="t", host="h", prefix="/e", backend="venv", steps=[
        Step(id="pip:packages", title="p", params=P.PipInstallParams(requirements=reqs)),
        Step(id="env-file", title="e", params=P.EnvFileParams(path="/e/.envbuild/env.sh", vars={}))])
    assert log_paths(plan) == {"/e/.envbuild/logs/pip-packages.log": "pip:packages"}


def test_env_from_fills_a_variable_the_node_does_not_set(tmp_path, monkeypatch):
    # uv reads SSL_CERT_FILE, pip PIP_CERT: a node that tells its pip which CA to trust tells uv too
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.setenv("PIP_CERT", "/etc/ssl/certs/proxy.pem")
    monkeypatch.setenv("UV_INDEX_URL", "https://mirror.example/simple")
    monkeypatch.setenv("PIP_INDEX_URL", "https://other.example/simple")
    out = node_actions.run_actions([{"op": "run", "argv": ["sh", "-c", 'echo "$SSL_CERT_FILE $UV_INDEX_URL"'],
                               "env_from": {"SSL_CERT_FILE": ["PIP_CERT"], "UV_INDEX_URL": ["PIP_INDEX_URL"]}}])
    assert out["log"][-1] == "/etc/ssl/certs/proxy.pem https://mirror.example/simple"
    from envbuild.actions.steps import env_from

    assert env_from("uv")["SSL_CERT_FILE"][0] == "PIP_CERT" and env_from("pip") == {}
