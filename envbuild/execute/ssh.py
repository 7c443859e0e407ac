"""Fabric helpers: one command or one file on a node, local or over SSH, with clear errors.

Used before and after the playbook (facts, HOME lookup, observed state); the playbook itself
runs through ansible-runner (``envbuild.execute.ansible``).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

from envbuild.errors import EnvironmentProblem
from envbuild.execute.local import run_local
from envbuild.execute.nodes import Node

T = TypeVar("T")
CONNECT_TIMEOUT = 10


def connection(node: Node):
    """A Fabric connection for an SSH node (host keys not checked only when node.insecure)."""
    from fabric import Config, Connection

    kwargs: dict = {"banner_timeout": CONNECT_TIMEOUT}
    if node.identity_file:
        kwargs["key_filename"] = node.identity_file
    cfg = Config(overrides={"load_ssh_configs": not node.insecure})
    conn = Connection(node.host, user=node.user, port=node.port, connect_kwargs=kwargs, config=cfg,
                      connect_timeout=CONNECT_TIMEOUT)
    if node.insecure:
        import paramiko

        conn.client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    return conn


def run(node: Node, command: str, *, timeout: float = 300) -> tuple[int, str, str]:
    """Run ``command`` with sh on the node; (rc, stdout, stderr). Unreachable -> EnvironmentProblem."""
    if node.is_local:
        return run_local(command, timeout=timeout)
    try:
        with connection(node) as conn:
            r = conn.run(command, hide=True, warn=True, timeout=timeout, in_stream=False)
            return r.return_code, r.stdout, r.stderr
    except EnvironmentProblem:
        raise
    except Exception as exc:  # noqa: BLE001 - paramiko/socket errors all mean "cannot reach"
        raise EnvironmentProblem(f"{node.name}: cannot reach {node.target}"
                                 f"{':' + str(node.port) if node.port else ''}: {exc}",
                                 hint="check the address, port, user and key (ssh -p PORT user@host true)") from None


def put_text(node: Node, text: str, remote_path: str) -> None:
    """Write ``text`` to ``remote_path`` on the node (parent folder must exist)."""
    if node.is_local:
        from envbuild.fsio import write_atomic

        write_atomic(remote_path, text)
        return
    import io

    with connection(node) as conn:
        conn.put(io.BytesIO(text.encode()), remote_path)


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
