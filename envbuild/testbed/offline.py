"""Chroot nodes with no route out: each in its own network namespace, reachable from the
controller over one veth pair and nothing else.

Node ``i`` lives in the namespace ``<tag>-<i>`` with ``eth0`` = 10.241.<base+i>.2/30 and ``lo``;
the controller's end of the pair holds 10.241.<base+i>.1/30 (the only route between them). The
namespace has no default route, so a node reaches no index, no mirror, no DNS: what it
installs must come over SSH (``envbuild provision --bundle``). sshd runs in the node's chroot
and PID namespace as in ``envbuild.testbed.chroot``. Leaving the context kills the nodes and
deletes the namespaces (which removes the veth pairs).

Example::

    with OfflineCluster(tmp_path, 1, tag="eboff") as nodes:
        nodes[0].ssh("python3 -c 'import socket; socket.create_connection((\\"pypi.org\\", 443), 3)'",
                     check=False).returncode  # != 0: no route
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from envbuild.testbed.chroot import ChrootNode, client_key, node_cpus, rootfs, write_known_hosts


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def stale_links(prefix: str) -> list[str]:
    """Host links that already hold an address in ``prefix``: the controller's end of a veth
    pair left by a run that was killed before it could delete its namespaces. Its address
    would make this node's route ambiguous (sshd then never answers on the new pair)."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show", "to", prefix],
                         capture_output=True, text=True).stdout
    return [line.split()[1].split("@")[0] for line in out.splitlines() if len(line.split()) > 1]


class OfflineCluster:
    """``n`` chroot nodes, each in a network namespace without a default route."""

    def __init__(self, folder: Path, n: int, *, tag: str = "ebo", base: int = 10):
        self.folder = Path(folder)
        self.key = client_key(self.folder / "client")
        self.tag, self.base = tag, base
        self.nodes: list[ChrootNode] = []
        self.namespaces: list[str] = []
        for i in range(n):
            ns = f"{tag}-{i + 1}"
            addr = f"10.241.{base + i}.2"
            self.nodes.append(ChrootNode(name=f"{tag}{i + 1}", addr=addr, port=22, key=self.key,
                                         dir=self.folder / f"{tag}{i + 1}",
                                         launcher=["nsenter", f"--net=/run/netns/{ns}"],
                                         cpus=node_cpus(i, n)))
            self.namespaces.append(ns)

    def _net(self, i: int) -> None:
        ns, host_if = self.namespaces[i], f"{self.tag}{i + 1}h"
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
        for link in stale_links(f"10.241.{self.base + i}.0/30"):  # a killed earlier run's pair
            subprocess.run(["ip", "link", "delete", link], capture_output=True)
        _ip("netns", "add", ns)
        _ip("link", "add", host_if, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("addr", "add", f"10.241.{self.base + i}.1/30", "dev", host_if)
        _ip("link", "set", host_if, "up")
        _ip("-n", ns, "addr", "add", f"10.241.{self.base + i}.2/30", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")

    def __enter__(self) -> list[ChrootNode]:
        lower = rootfs()
        try:
            for i, node in enumerate(self.nodes):
                self._net(i)
                node.start(lower)
        except BaseException:
            self.stop()
            raise
        write_known_hosts(self.known_hosts, self.nodes, lambda n: n.addr)  # port 22
        return self.nodes

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def known_hosts(self) -> Path:
        return self.folder / "known_hosts"

    @property
    def hosts(self) -> str:
        return ",".join(f"root@{n.addr}" for n in self.nodes)

    def routes(self, i: int = 0) -> str:
        """``ip route`` inside node ``i``'s namespace (no ``default`` line)."""
        return subprocess.run(["ip", "-n", self.namespaces[i], "route"], capture_output=True,
                              text=True).stdout

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        for ns in self.namespaces:
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
