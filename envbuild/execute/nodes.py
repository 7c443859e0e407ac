"""The nodes a provision runs on: parsed from --hosts, an Ansible YAML inventory, or local.

Example::

    >>> [n.name for n in parse_hosts("root@127.0.0.2:2201,127.0.0.3")]
    ['127.0.0.2', '127.0.0.3']
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from envbuild.errors import InputError

DEFAULT_NODE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_HOST_RE = re.compile(r"^(?:(?P<user>[^@\s]+)@)?(?P<host>[A-Za-z0-9_.\-]+|\[[0-9a-fA-F:]+\])(?::(?P<port>\d+))?$")


@dataclass(frozen=True)
class Node:
    """One node: how to reach it and which Python Ansible runs its modules with."""

    name: str  # inventory name, also the folder under runs/<id>/nodes/
    host: str = "localhost"
    user: str | None = None
    port: int | None = None
    connection: str = "ssh"  # ssh | local
    python: str | None = None  # interpreter for Ansible modules on the node
    identity_file: str | None = None
    insecure: bool = False  # no host key checking (test nodes only)
    extra: dict = field(default_factory=dict)

    @property
    def is_local(self) -> bool:
        return self.connection == "local"

    @property
    def node_path(self) -> str:
        return os.environ.get("PATH", DEFAULT_NODE_PATH) if self.is_local else DEFAULT_NODE_PATH

    @property
    def target(self) -> str:
        """user@host for Fabric."""
        return f"{self.user}@{self.host}" if self.user else self.host


def local_node() -> Node:
    """The controller itself, with connection=local and this Python for Ansible modules."""
    return Node(name="local", host="localhost", connection="local", python=sys.executable)


def parse_hosts(spec: str, *, identity_file: str | None = None, insecure: bool = False) -> list[Node]:
    """``user@h1,h2:2222`` -> nodes; a user given once applies to the later hosts too."""
    nodes: list[Node] = []
    user = None
    for raw in [s.strip() for s in spec.split(",") if s.strip()]:
        m = _HOST_RE.match(raw)
        if not m:
            raise InputError(f"cannot read host {raw!r}", hint="use --hosts user@host[:port],host2")
        user = m["user"] or user
        port = int(m["port"]) if m["port"] else None
        name = m["host"] if port is None or not any(n.host == m["host"] for n in nodes) else raw
        nodes.append(Node(name=name, host=m["host"], user=user, port=port,
                          identity_file=identity_file, insecure=insecure))
    if not nodes:
        raise InputError("--hosts is empty", hint="use --hosts user@host[:port],host2")
    _unique(nodes)
    return nodes


def load_inventory(path: str | Path, *, insecure: bool = False) -> list[Node]:
    """Nodes from an Ansible YAML inventory (``all: {hosts: {name: {ansible_host: ...}}}``)."""
    from envbuild.yamlsrc import load_yaml

    data, _ = load_yaml(Path(path))
    hosts = {}
    if isinstance(data, dict):
        group = data.get("all", data)
        hosts = (group or {}).get("hosts") or {}
        for child in ((group or {}).get("children") or {}).values():
            hosts.update((child or {}).get("hosts") or {})
    if not hosts:
        raise InputError(f"{path}: no hosts found",
                         hint="write an Ansible YAML inventory: all: {hosts: {node1: {ansible_host: 10.0.0.1}}}")
    nodes = []
    for name, hv in hosts.items():
        hv = hv or {}
        nodes.append(Node(name=str(name), host=str(hv.get("ansible_host", name)),
                          user=hv.get("ansible_user"), port=hv.get("ansible_port"),
                          connection=hv.get("ansible_connection", "ssh"),
                          python=hv.get("ansible_python_interpreter"),
                          identity_file=hv.get("ansible_ssh_private_key_file"),
                          insecure=insecure or bool(hv.get("envbuild_insecure", False))))
    _unique(nodes)
    return nodes


def _unique(nodes: list[Node]) -> None:
    names = [n.name for n in nodes]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"host named twice: {', '.join(dup)}", hint="list each node once")
