"""The only code that touches a node: run one shell command, return (rc, stdout, stderr).

``LocalRunner`` uses subprocess; ``SshRunner`` uses one Fabric connection to a ``Node``
(``envbuild.connect.nodes``, the one node model of facts, provision and verify). An unreachable
host, or one whose host key is unknown or changed, raises ``EnvironmentProblem`` naming the
host, the reason and what to try.
"""

from __future__ import annotations

import socket
import subprocess
from dataclasses import dataclass
from typing import Protocol

from envbuild.connect.nodes import Node
from envbuild.connect.ssh import close, connection, failure, run_with_stdin
from envbuild.errors import EnvironmentProblem

DEFAULT_TIMEOUT_S = 600


@dataclass(frozen=True)
class Result:
    rc: int
    stdout: str
    stderr: str


class Runner(Protocol):
    """Runs a shell command on one node."""

    name: str

    def run(self, command: str, *, timeout: int = DEFAULT_TIMEOUT_S, stdin: str | None = None) -> Result: ...


class LocalRunner:
    """Runs commands on this machine with ``sh -c``."""

    def __init__(self, name: str | None = None):
        self.name = name or socket.gethostname()

    def run(self, command: str, *, timeout: int = DEFAULT_TIMEOUT_S, stdin: str | None = None) -> Result:
        try:
            p = subprocess.run(
                ["sh", "-c", command], capture_output=True, text=True, errors="replace",
                **({"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}), timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            raise EnvironmentProblem(
                f"local command timed out after {timeout} s", hint="a tool on this machine hangs (nvidia-smi?)"
            ) from exc
        return Result(p.returncode, p.stdout, p.stderr)


class SshRunner:
    """Runs commands on an SSH ``Node`` over one Fabric connection (opened lazily, closed by
    ``close``); host keys checked as ``envbuild.connect.hostkeys`` says."""

    def __init__(self, node: Node, *, connect_timeout: int = 10):
        self.node = node
        self.name = node.name
        self.conn = connection(node, connect_timeout=connect_timeout)

    def run(self, command: str, *, timeout: int = DEFAULT_TIMEOUT_S, stdin: str | None = None) -> Result:
        from invoke.exceptions import CommandTimedOut

        try:
            self.conn.open()
        except Exception as exc:  # noqa: BLE001 - every connection error means "cannot reach"
            raise failure(self.node, exc, self.conn) from None
        try:
            if stdin is not None:
                return Result(*run_with_stdin(self.conn, command, stdin, timeout))
            r = self.conn.run(command, hide=True, warn=True, in_stream=False, timeout=timeout)
        except CommandTimedOut as exc:
            raise EnvironmentProblem(
                f"{self.name}: command timed out after {timeout} s", hint="a tool on the node hangs"
            ) from exc
        except Exception as exc:  # noqa: BLE001
            raise failure(self.node, exc, self.conn) from None
        return Result(r.return_code, r.stdout, r.stderr)

    def close(self) -> None:
        close(self.conn)
