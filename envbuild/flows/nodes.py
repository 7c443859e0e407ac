"""The nodes a request names and how to reach them: one field of every request whose flow
reaches nodes (facts, provision, verify, launch).

The CLI may not import ``envbuild.connect`` (pyproject's import-linter contract "cli-thin"), so
it gives the node options as a ``NodesRequest``; the flow turns it into the one
``NodeSelection`` (``envbuild.connect.selection``), which checks it (two of ``hosts``,
``inventory`` and ``local`` are bad input, exit 2) as it is made. Each flow reads what its
command offers: facts all of it, verify all but ``user`` and ``port``, provision ``hosts``,
``inventory``, the key, the known_hosts files and ``insecure`` (through its options), launch
the key and the known_hosts files (over those its provision run recorded).
"""

from __future__ import annotations

from dataclasses import dataclass

from envbuild.connect.selection import NodeSelection


@dataclass(frozen=True)
class NodesRequest:
    """``hosts`` (``[user@]host[:port],...``; ``local``: this machine), ``inventory`` (an Ansible
    inventory file) or ``local``; the SSH key ``identity_file``, the ``known_hosts`` files,
    ``insecure`` (no host key checking); ``user`` and ``port``, what a ``hosts`` entry leaves
    out (None: ssh's own)."""

    hosts: str | None = None
    inventory: str | None = None
    local: bool = False
    identity_file: str | None = None
    known_hosts: tuple[str, ...] = ()
    insecure: bool = False
    user: str | None = None
    port: int | None = None

    def selection(self, *, port_names: bool = False) -> NodeSelection:
        """The ``NodeSelection`` of these options (InputError for more than one of hosts,
        inventory and local); ``port_names`` names a node on another port ``host:port``."""
        return NodeSelection(hosts=self.hosts, inventory=self.inventory, local=self.local,
                             identity_file=self.identity_file, known_hosts=tuple(self.known_hosts),
                             insecure=self.insecure, user=self.user, port=self.port, port_names=port_names)
