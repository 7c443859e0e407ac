"""The only code that touches a node: run one shell command, return (rc, stdout, stderr).

``LocalRunner`` uses subprocess; ``SshRunner`` uses one Fabric connection. An unreachable host
raises ``EnvironmentProblem`` naming the host, the reason and what to try.
"""

from __future__ import annotations

import socket
import subprocess
from dataclasses import dataclass
from typing import Protocol

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

    def run(self, command: str, *, timeout: int = DEFAULT_TIMEOUT_S) -> Result: ...


class LocalRunner:
    """Runs commands on this machine with ``sh -c``."""

    def __init__(self, name: str | None = None):
        self.name = name or socket.gethostname()

    def run(self, command: str, *, timeout: int = DEFAULT_TIMEOUT_S) -> Result:
        try:
            p = subprocess.run(
                ["sh", "-c", command], capture_output=True, text=True, errors="replace",
                stdin=subprocess.DEVNULL, timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            raise EnvironmentProblem(
                f"local command timed out after {timeout} s", hint="a tool on this machine hangs (nvidia-smi?)"
            ) from exc
        return Result(p.returncode, p.stdout, p.stderr)


@dataclass(frozen=True)
class HostSpec:
    """One SSH target: ``name`` is how it is shown (inventory name or the address given)."""

    host: str
    port: int = 22
    user: str | None = None
    identity: str | None = None
    name: str | None = None

    @property
    def label(self) -> str:
        return self.name or (self.host if self.port == 22 else f"{self.host}:{self.port}")

    @property
    def target(self) -> str:
        return f"{self.user + '@' if self.user else ''}{self.host}"


def _unreachable(spec: HostSpec, reason: str) -> EnvironmentProblem:
    return EnvironmentProblem(
        f"{spec.label}: cannot reach {spec.target} port {spec.port}: {reason}",
        hint=f"check the ssh key (--identity), the port (--port) and that "
        f"`ssh -p {spec.port} {spec.user or '$USER'}@{spec.host} true` works",
        where=None,
    )


def _reason(exc: BaseException) -> str:
    """A short, human reason for a failed SSH connection."""
    import paramiko
    from paramiko.ssh_exception import NoValidConnectionsError

    if isinstance(exc, NoValidConnectionsError) or isinstance(exc, ConnectionRefusedError):
        return "connection refused (nothing listens on that port?)"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "connection timed out"
    if isinstance(exc, socket.gaierror):
        return f"unknown host name ({exc.strerror})"
    if isinstance(exc, paramiko.AuthenticationException):
        return f"authentication failed ({exc})"
    return str(exc) or type(exc).__name__


class SshRunner:
    """Runs commands on ``spec`` over one Fabric connection (opened lazily, closed by ``close``)."""

    def __init__(self, spec: HostSpec, *, connect_timeout: int = 10):
        from fabric import Connection

        self.spec = spec
        self.name = spec.label
        kwargs: dict = {"banner_timeout": connect_timeout, "auth_timeout": connect_timeout}
        if spec.identity:
            kwargs.update(key_filename=[spec.identity], look_for_keys=False)
        self.conn = Connection(
            spec.host, user=spec.user, port=spec.port, connect_timeout=connect_timeout, connect_kwargs=kwargs
        )

    def run(self, command: str, *, timeout: int = DEFAULT_TIMEOUT_S) -> Result:
        import paramiko
        from invoke.exceptions import CommandTimedOut

        try:
            self.conn.open()
        except (OSError, paramiko.SSHException, EOFError) as exc:
            raise _unreachable(self.spec, _reason(exc)) from exc
        try:
            r = self.conn.run(command, hide=True, warn=True, in_stream=False, timeout=timeout)
        except CommandTimedOut as exc:
            raise EnvironmentProblem(
                f"{self.spec.label}: command timed out after {timeout} s", hint="a tool on the node hangs"
            ) from exc
        except (OSError, paramiko.SSHException, EOFError) as exc:
            raise _unreachable(self.spec, f"connection lost: {exc}") from exc
        return Result(r.return_code, r.stdout, r.stderr)

    def close(self) -> None:
        self.conn.close()
