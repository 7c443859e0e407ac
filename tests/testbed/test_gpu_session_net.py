"""A smoke wave's jobs each run in a network namespace of their own (bench/gpu_session.sh
``own_net``): run 20's Megatron-DeepSpeed benchmark died beside alpa's because both launchers
rendezvous on 127.0.0.1:29500. Two listeners on one port at once, each in its own namespace,
both bind; without the namespaces the second is refused (EADDRINUSE); the loopback comes up
without iproute2 too (the python3 ioctls). The port is one this machine had free when the test
began, not 29500 itself: a listener outside the namespaces holds it on the host, where another
test may be using 29500."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import ROOT

SESSION = ROOT / "bench" / "gpu_session.sh"
HOLD = """
import socket, sys, time
port = int(sys.argv[2])
s = socket.socket()
try:
    s.bind(("127.0.0.1", port))
except OSError as e:
    print("refused", e.errno)
    sys.exit(3)
s.listen()
socket.create_connection(("127.0.0.1", port)).close()
print("held", flush=True)
time.sleep(float(sys.argv[1]))
"""

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode != 0,
    reason="unshare --net needs root")


@pytest.fixture
def port() -> int:
    """A port of 127.0.0.1 that was free on this machine a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _hold(tmp_path: Path, seconds: float, port: int, *, own_net: bool, env: dict | None = None) -> subprocess.Popen:
    script = tmp_path / "hold.py"
    script.write_text(HOLD)
    cmd = [sys.executable, str(script), str(seconds), str(port)]
    argv = ["bash", str(SESSION), "own-net", *cmd] if own_net else cmd
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def _wait_held(p: subprocess.Popen) -> str:
    return p.stdout.readline().strip()


def test_two_jobs_of_a_wave_bind_the_same_rendezvous_port(tmp_path, port):
    first = _hold(tmp_path, 3, port, own_net=True)
    assert _wait_held(first) == "held", first.stderr.read()
    second = _hold(tmp_path, 0, port, own_net=True)
    out, err = second.communicate(timeout=30)
    assert second.returncode == 0 and out.strip() == "held", out + err
    assert first.wait(timeout=30) == 0


def test_without_namespaces_the_second_is_refused(tmp_path, port):
    first = _hold(tmp_path, 3, port, own_net=False)
    assert _wait_held(first) == "held"
    second = _hold(tmp_path, 0, port, own_net=False)
    out, _ = second.communicate(timeout=30)
    first.wait(timeout=30)
    assert second.returncode == 3 and out.strip() == "refused 98"


def test_the_loopback_comes_up_without_iproute2(tmp_path, port):
    """PATH without ip: the python3 ioctls bring lo up (the node may lack iproute2)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("unshare", "sh", "python3", "date", "bash", "true"):
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    outside = _hold(tmp_path, 3, port, own_net=False)
    assert _wait_held(outside) == "held"
    p = _hold(tmp_path, 0, port, own_net=True, env={"PATH": str(bin_dir)})
    out, err = p.communicate(timeout=30)
    outside.wait(timeout=30)
    assert p.returncode == 0 and out.strip() == "held", out + err


def test_own_net_0_runs_the_command_as_it_is_and_says_so(tmp_path, port):
    first = _hold(tmp_path, 3, port, own_net=False)
    assert _wait_held(first) == "held"
    second = _hold(tmp_path, 0, port, own_net=True, env={"OWN_NET": "0"})
    out, _ = second.communicate(timeout=30)
    first.wait(timeout=30)
    assert second.returncode == 3 and "own_net: not in a namespace of its own (OWN_NET=0" in out
