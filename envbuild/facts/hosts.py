"""Which nodes to gather: ``--hosts`` lists and Ansible inventories, read by
``envbuild.connect.nodes`` (the node model provision and verify use too).

The one difference: a node given by ``--hosts`` with a port other than 22 is named
``host:port`` in facts, so two nodes on one address stay apart::

    >>> [n.name for n in parse_hosts("root@10.0.0.1,10.0.0.2:2222")]
    ['10.0.0.1', '10.0.0.2:2222']
"""

from __future__ import annotations

from dataclasses import replace

from envbuild.connect import nodes as _nodes
from envbuild.connect.nodes import Node, read_inventory

__all__ = ["parse_hosts", "read_inventory", "label"]


def label(node: Node) -> str:
    """``host`` or ``host:port`` (port other than 22)."""
    return node.host if node.port in (None, 22) else f"{node.host}:{node.port}"


def parse_hosts(text: str, *, user: str | None = None, port: int | None = 22, identity: str | None = None,
                insecure: bool = False, known_hosts: tuple[str, ...] | None = None) -> list[Node]:
    """``[user@]host[:port],...`` as nodes named by ``label``; see ``connect.nodes.parse_hosts``."""
    found = _nodes.parse_hosts(text, user=user, port=port, identity_file=identity, insecure=insecure,
                               known_hosts=known_hosts)
    return [replace(n, name=label(n)) for n in found]
