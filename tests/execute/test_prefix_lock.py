"""One provision of a prefix per node at a time (envbuild.execute.prefixlock): a second run
stops before it touches the node, naming the run that holds the prefix; a killed holder
leaves no stale lock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from envbuild.connect.nodes import Node
from envbuild.errors import EnvironmentProblem
from envbuild.execute import prefixlock

WHEELS = "/opt/wheels"


def test_a_held_prefix_is_refused_and_another_is_not(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ENVBUILD_LOCK_DIR", str(tmp_path / "locks"))
    local = Node(name="local", connection="local")
    with prefixlock.held([(local, str(tmp_path / "env"))], "run-a"):
        with pytest.raises(EnvironmentProblem) as err:
            with prefixlock.held([(local, str(tmp_path / "env" / "."))], "run-b"):
                pass
        assert "is being provisioned by run run-a" in err.value.message and err.value.exit_code == 3
        with prefixlock.held([(local, str(tmp_path / "other"))], "run-c"):
            pass  # another prefix: no conflict
    with prefixlock.held([(local, str(tmp_path / "env"))], "run-d"):
        pass  # released at the end of run-a
    a = Node(name="n1", host="10.0.0.1", user="root")
    b = Node(name="n2", host="10.0.0.2", user="root")
    assert prefixlock.key(a, "/opt/env") != prefixlock.key(b, "/opt/env")  # per node


def test_a_killed_holder_leaves_no_stale_lock(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ENVBUILD_LOCK_DIR", str(tmp_path / "locks"))
    code = ("import sys, time\nfrom envbuild.execute import prefixlock\nfrom envbuild.connect.nodes import Node\n"
            f"with prefixlock.held([(Node(name='local', connection='local'), {str(tmp_path / 'env')!r})], 'killed'):\n"
            "    print('held', flush=True)\n    time.sleep(600)\n")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "ENVBUILD_LOCK_DIR": str(tmp_path / "locks")})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(EnvironmentProblem) as err:
            with prefixlock.held([(Node(name="local", connection="local"), str(tmp_path / "env"))], "second"):
                pass
        assert f"(pid {holder.pid})" in err.value.message
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with prefixlock.held([(Node(name="local", connection="local"), str(tmp_path / "env"))], "after"):
        pass  # the kernel released it with the process


@pytest.mark.integration
def test_a_second_provision_of_a_held_prefix_exits_3_before_touching_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ENVBUILD_LOCK_DIR", str(tmp_path / "locks"))
    prefix = tmp_path / "env"
    env = {**os.environ, "ENVBUILD_HOME": str(tmp_path / "home"), "ENVBUILD_LOCK_DIR": str(tmp_path / "locks")}
    with prefixlock.held([(Node(name="local", connection="local"), str(prefix))], "20261123-000000-holder"):
        t = time.time()
        p = subprocess.run([sys.executable, "-m", "envbuild", "provision", "--target", "local", "--prefix",
                            str(prefix), "--wheelhouse", WHEELS, "--json"], capture_output=True, text=True,
                           env=env, timeout=600)
        took = time.time() - t
    assert p.returncode == 3, p.stdout[-2000:] + p.stderr[-2000:]
    assert "is being provisioned by run 20261123-000000-holder" in p.stderr
    assert not prefix.exists() and took < 120  # nothing installed, no wait
    runs = [d for d in (tmp_path / "home" / "runs").iterdir() if d.is_dir() and not d.is_symlink()]
    [record] = [json.loads((d / "run.json").read_text()) for d in runs]
    assert record["status"] == "error" and record["phase"] == "prefix-lock", record


def test_the_lock_on_the_prefix_itself_keeps_two_controllers_apart(tmp_path) -> None:
    """``on_nodes`` holds flock on <prefix>/.envbuild/prefix.lock through a process of the node's
    own (here the local node's): a second run from another controller (another lock folder)
    finds it held, stops at once on a node's own prefix, waits on a shared one, and takes it
    once the first run's block ends."""
    local = Node(name="local", connection="local")
    prefix = str(tmp_path / "env")
    said: list[str] = []
    with prefixlock.on_nodes([prefixlock.Claim(local, prefix)], "run-a"):
        holder = json.loads((tmp_path / "env" / ".envbuild" / "prefix.lock").read_text())
        assert holder["run"] == "run-a" and holder["pid"] == os.getpid() and holder["node"] == "local"
        with pytest.raises(EnvironmentProblem) as err:
            with prefixlock.on_nodes([prefixlock.Claim(local, prefix)], "run-b"):
                pass
        assert "is being provisioned by run run-a from" in err.value.message and err.value.exit_code == 3
        with pytest.raises(EnvironmentProblem) as err:
            with prefixlock.on_nodes([prefixlock.Claim(local, prefix, wait_s=1.5)], "run-c",
                                     lambda node, msg: said.append(f"{node}: {msg}")):
                pass
        assert "after waiting 1.5 s" in err.value.message
        assert said and said[0].startswith("local: ") and "is held by run run-a" in said[0]
        assert "waiting for it (up to 1.5 s)" in said[0]
    with prefixlock.on_nodes([prefixlock.Claim(local, prefix)], "run-d"):
        assert json.loads((tmp_path / "env" / ".envbuild" / "prefix.lock").read_text())["run"] == "run-d"


def hold_elsewhere(prefix, run: str, seconds: int) -> subprocess.Popen:
    """Another controller (a process of its own) holding ``prefix`` through node n1 for ``seconds``."""
    code = ("import time\nfrom envbuild.execute import prefixlock\nfrom envbuild.connect.nodes import Node\n"
            f"with prefixlock.on_nodes([prefixlock.Claim(Node(name='n1', connection='local'), {str(prefix)!r})], {run!r}):\n"
            f"    print('held', flush=True)\n    time.sleep({seconds})\n")
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def test_a_waiting_run_takes_a_shared_prefix_when_its_holder_ends(tmp_path) -> None:
    first = hold_elsewhere(tmp_path / "env", "first", 2)
    try:
        assert first.stdout.readline().strip() == "held"
        t = time.monotonic()
        said: list[str] = []
        with prefixlock.on_nodes([prefixlock.Claim(Node(name="n2", connection="local"), str(tmp_path / "env"), 60)],
                                 "second", lambda node, msg: said.append(msg)):
            waited = time.monotonic() - t
        assert 0.5 < waited < 30 and "through n1" in said[0]
    finally:
        first.wait(timeout=30)


def test_a_killed_controller_leaves_the_prefix_unlocked(tmp_path) -> None:
    holder = hold_elsewhere(tmp_path / "env", "killed", 600)
    try:
        assert holder.stdout.readline().strip() == "held"
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # the node's holder process read end-of-file when the controller died, and let go
    with prefixlock.on_nodes([prefixlock.Claim(Node(name="n2", connection="local"), str(tmp_path / "env"), 20)],
                             "after"):
        pass


def test_claims_lock_a_shared_prefix_once_and_each_own_prefix() -> None:
    a, b = Node(name="a", host="10.0.0.1"), Node(name="b", host="10.0.0.2")
    own = prefixlock.claims([a, b], {"a": "/e", "b": "/e"}, shared=False)
    assert [(c.node.name, c.wait_s) for c in own] == [("a", 0.0), ("b", 0.0)]
    one = prefixlock.claims([a, b], {"a": "/e/", "b": "/e"}, shared=True)
    assert [(c.node.name, c.wait_s) for c in one] == [("a", prefixlock.SHARED_WAIT_S)]
