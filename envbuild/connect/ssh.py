"""Fabric helpers: one command or one file on a node, local or over SSH, with clear errors.

Used before and after the playbook (facts, HOME lookup, observed state, verify); the playbook
itself runs through ansible-runner (``envbuild.execute.ansible``). A connection reads the same
``Node`` Ansible gets: host keys checked as ssh checks them (``envbuild.connect.hostkeys``),
``ProxyJump``/``-J``/``ProxyCommand`` from the node's ansible ssh args honoured, the key and
``ansible_password`` used.
"""

from __future__ import annotations

import re
import shlex
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Callable, TypeVar

from envbuild.connect import hostkeys
from envbuild.connect.local import run_local
from envbuild.connect.nodes import Node, ssh_options
from envbuild.errors import EnvironmentProblem

T = TypeVar("T")
CONNECT_TIMEOUT = 10
_HOP = re.compile(r"^(?:ssh://)?(?:(?P<user>[^@\s]+)@)?(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[^:@\s\[\]]+))"
                  r"(?::(?P<port>\d+))?$")


def connection(node: Node, *, connect_timeout: int = CONNECT_TIMEOUT):
    """A Fabric connection (not yet open) for an SSH node, host keys checked unless insecure."""
    from fabric import Connection

    check = hostkeys.host_key_check(node)
    kwargs: dict = {"banner_timeout": connect_timeout, "auth_timeout": connect_timeout}
    if node.identity_file:
        kwargs["key_filename"] = [node.identity_file]
    password = node.ansible_vars.get("ansible_password") or node.ansible_vars.get("ansible_ssh_pass")
    if password:
        kwargs["password"] = str(password)
    conn = Connection(node.host, user=node.user, port=node.port, connect_kwargs=kwargs,
                      connect_timeout=connect_timeout, gateway=_gateway(node, check, connect_timeout))
    hostkeys.apply(conn.client, node, check)
    return conn


def close(conn) -> None:
    """Close a connection and the gateways it went through."""
    while conn is not None and not isinstance(conn, str):
        conn.close()
        conn = conn.gateway


def failure(node: Node, exc: BaseException, conn=None) -> EnvironmentProblem:
    """Any connection error as an EnvironmentProblem naming the node, the reason and a hint."""
    import paramiko

    if isinstance(exc, EnvironmentProblem):
        return exc
    if isinstance(exc, paramiko.BadHostKeyException):
        port = _port_of(conn, exc.hostname) if conn is not None else node.port
        return hostkeys.refused(node, exc, port=port)
    port = node.port or 22
    hops = jump_hosts(node)
    via = f" via {' -> '.join(h.target + (f':{h.port}' if h.port else '') for h in hops)}" if hops else ""
    return EnvironmentProblem(
        f"{node.name}: cannot reach {node.target} port {port}{via}: {reason(exc)}",
        hint="check the ssh key (--identity), the port and that "
             f"`ssh -p {port} -- {shlex.quote(f'{node.user}@{node.host}' if node.user else node.host)} true` works",
    )


def reason(exc: BaseException) -> str:
    """A short, human reason for a failed SSH connection."""
    import paramiko
    from paramiko.ssh_exception import NoValidConnectionsError

    if isinstance(exc, NoValidConnectionsError):
        where = ", ".join(f"{a[0]}:{a[1]}" for a in exc.errors) or "the address"
        return f"connection refused by {where} (nothing listens on that port?)"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (nothing listens on that port?)"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "connection timed out"
    if isinstance(exc, socket.gaierror):
        return f"unknown host name ({exc.strerror})"
    if isinstance(exc, paramiko.AuthenticationException):
        return f"authentication failed ({exc})"
    if isinstance(exc, paramiko.ChannelException):
        return f"the jump host could not open a channel to it ({exc})"
    return str(exc) or type(exc).__name__


def run(node: Node, command: str, *, timeout: float = 300, stdin: str | None = None) -> tuple[int, str, str]:
    """Run ``command`` with sh on the node, ``stdin`` on its standard input (None: none);
    (rc, stdout, stderr). Unreachable -> EnvironmentProblem."""
    if node.is_local:
        return run_local(command, timeout=timeout, stdin=stdin)
    conn = connection(node)
    try:
        if stdin is not None:
            return run_with_stdin(conn, command, stdin, timeout)
        r = conn.run(command, hide=True, warn=True, timeout=timeout, in_stream=False)
        return r.return_code, r.stdout, r.stderr
    except Exception as exc:  # noqa: BLE001 - paramiko/socket errors all mean "cannot reach"
        raise failure(node, exc, conn) from None
    finally:
        close(conn)


def run_with_stdin(conn, command: str, data: str, timeout: float) -> tuple[int, str, str]:
    """``command`` on the open-able Fabric connection ``conn`` with ``data`` on its stdin, then
    EOF: through paramiko's channel directly (Fabric's ``in_stream`` forwards a file that is not
    a terminal one byte per 10 ms: minutes for a megabyte). Sent from a thread while stdout is
    read, so a command that answers while it reads cannot block on a full window."""
    import threading

    conn.open()
    chan = conn.client.get_transport().open_session(timeout=timeout)
    chan.settimeout(timeout)
    chan.exec_command(command)
    failed: list[BaseException] = []

    def send() -> None:
        try:
            chan.sendall(data.encode())
            chan.shutdown_write()
        except (OSError, EOFError) as exc:  # the command ended before reading it all: its rc says
            failed.append(exc)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        with chan.makefile("rb") as out, chan.makefile_stderr("rb") as err:
            stdout, stderr = out.read(), err.read()
    except TimeoutError:
        chan.close()
        raise EnvironmentProblem(f"the command timed out after {timeout:.0f} s",
                                 hint="a tool on the node hangs") from None
    sender.join(timeout)
    rc = chan.recv_exit_status()
    chan.close()
    return rc, stdout.decode(errors="replace"), stderr.decode(errors="replace")


def each(nodes: list[Node], fn: Callable[[Node], T]) -> dict[str, T | Exception]:
    """Run ``fn(node)`` for every node in parallel; exceptions are returned, not raised."""
    out: dict[str, T | Exception] = {}

    def call(n: Node):
        try:
            return fn(n)
        except Exception as exc:  # noqa: BLE001 - reported per node by the caller
            return exc

    with ThreadPoolExecutor(max_workers=max(1, min(16, len(nodes)))) as pool:
        for node, res in zip(nodes, pool.map(call, nodes)):
            out[node.name] = res
    return out


def jump_hosts(node: Node) -> list[Node]:
    """The ProxyJump hops of a node (first hop first), as nodes sharing its key and host-key
    files. ``ssh://user@host:port`` and ``user@host:port`` forms; ``none`` means no hops."""
    spec = ssh_options(node).get("proxyjump", "")
    if not spec or spec.lower() == "none":
        return []
    hops = []
    for i, raw in enumerate(h.strip() for h in spec.split(",")):
        m = _HOP.match(raw)
        if not m:
            raise EnvironmentProblem(f"{node.name}: cannot read ProxyJump hop {raw!r}",
                                     hint="write ProxyJump=[user@]host[:port][,host2]")
        hops.append(replace(node, name=f"{node.name} (jump {i + 1}: {raw})", host=m["v6"] or m["host"],
                            user=m["user"], port=int(m["port"]) if m["port"] else None))
    return hops


def _gateway(node: Node, check: hostkeys.HostKeyCheck, connect_timeout: int):
    """Fabric's gateway for the node: a chain of Connections (ProxyJump) or a ProxyCommand."""
    from fabric import Connection

    opts = ssh_options(node)
    command = opts.get("proxycommand")
    if command and command.lower() != "none" and "proxyjump" not in opts:
        tokens = {"%h": node.host, "%p": str(node.port or 22), "%r": node.user or "", "%%": "%"}
        return re.sub(r"%[hpr%]", lambda m: tokens[m.group(0)], command)
    gateway = None
    for hop in jump_hosts(node):
        kwargs: dict = {"banner_timeout": connect_timeout, "auth_timeout": connect_timeout}
        if hop.identity_file:
            kwargs["key_filename"] = [hop.identity_file]
        gateway = Connection(hop.host, user=hop.user, port=hop.port, connect_kwargs=kwargs,
                             connect_timeout=connect_timeout, gateway=gateway)
        hostkeys.apply(gateway.client, hop, check)
    return gateway


def _port_of(conn, hostname: str) -> int | None:
    """The port of the connection in a gateway chain whose host is ``hostname``."""
    while conn is not None and not isinstance(conn, str):
        if conn.host == hostname:
            return conn.port
        conn = conn.gateway
    return None
