"""Which nodes to gather: ``--hosts`` lists and Ansible inventories, chosen by
``envbuild.connect.selection`` (the one node selection of facts, provision, verify and launch).

The one difference: a node given by ``--hosts`` with a port other than 22 is named
``host:port`` in facts, so two nodes on one address stay apart::

    >>> [n.name for n in parse_hosts("root@10.0.0.1,10.0.0.2:2222")]
    ['10.0.0.1', '10.0.0.2:2222']
"""

from __future__ import annotations

from envbuild.connect.nodes import Node, read_inventory
from envbuild.connect.selection import NodeSelection, label

__all__ = ["parse_hosts", "read_inventory", "label"]


def parse_hosts(text: str, *, user: str | None = None, port: int | None = 22, identity: str | None = None,
                insecure: bool = False, known_hosts: tuple[str, ...] | None = None) -> list[Node]:
    """``[user@]host[:port],...`` as nodes named by ``label``; see ``connect.nodes.parse_hosts``."""
    return NodeSelection(hosts=text, user=user, port=port, identity_file=identity, insecure=insecure,
                         known_hosts=tuple(known_hosts or ()), port_names=True).nodes()
