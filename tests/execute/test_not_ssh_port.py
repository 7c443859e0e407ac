"""A node that accepts TCP but does not speak SSH (issue 53): ``provision --dry-run --hosts
user@127.0.0.1:PORT`` says the node is unreachable in envbuild's words (exit 3) and nothing
else: no paramiko traceback or log line on stderr (``envbuild.cli.logs``), no "run by hand"
command for a node that has no plan. ``--debug`` shows the library's records. A real process
(the console script's stderr) against a plain TCP server opened here."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading

import pytest

pytestmark = pytest.mark.process


@pytest.fixture
def not_ssh():
    """A TCP server that answers every connection with an HTTP line and closes it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    stop.set()
    server.close()


def provision(port: int, tmp_path, *pre: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ENVBUILD_HOME": str(tmp_path / "home")}
    return subprocess.run([sys.executable, "-m", "envbuild", *pre, "provision", "--dry-run", "--target", "local",
                           "--hosts", f"user@127.0.0.1:{port}", "--prefix", str(tmp_path / "env")],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)


def test_a_port_that_does_not_speak_ssh_is_unreachable_in_envbuilds_words_only(not_ssh, tmp_path) -> None:
    p = provision(not_ssh, tmp_path)
    assert p.returncode == 3, p.stdout + p.stderr
    assert f"cannot reach user@127.0.0.1 port {not_ssh}" in p.stdout
    assert "Traceback" not in p.stderr and "paramiko" not in p.stderr and "Exception (client)" not in p.stderr, p.stderr
    assert "run by hand" not in p.stdout and "ansible-playbook" not in p.stdout
    shown = provision(not_ssh, tmp_path, "--debug")
    assert shown.returncode == 3 and "debug: paramiko.transport: ERROR" in shown.stderr
