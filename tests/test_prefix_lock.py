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
