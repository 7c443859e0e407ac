#!/usr/bin/env python3
"""Every rank's InfiniBand IPv4 address, found when the job's pods start. Standard library only.

Copied into a multi-node job (a recipe run's ``address_var``, ``envbuild.recipes.schema.Run``) and run
by each node before the training command::

    VAR="$(python3 "$JOB_DIR"/ib_addresses.py --per-node "$ENVBUILD_NPROC_PER_NODE")"

Each node finds its own address: the first IPv4 address of the network interface of the first
active InfiniBand/RoCE port (``/sys/class/infiniband/<dev>/ports/<n>/state``; a RoCE port names
its interface in ``gid_attrs/ndevs/0``, an IPoIB interface is listed under the device's
``device/net/``), the rule of the node facts (``envbuild.facts.ib.ib_address``). Node 0
(``ENVBUILD_NODE_RANK``) listens on ``--port``; every other node connects to it
(``ENVBUILD_MASTER_ADDR``), retrying until ``--timeout``, and sends ``<node rank> <address>``;
node 0 answers all of them with the whole list. Each node prints the same line: the addresses
in global-rank order (node-major: node r's address ``--per-node`` times), comma-separated.

One node alone prints its address (or 127.0.0.1 when it has no active port: its ranks never
connect to one another over InfiniBand). Exit 1 with a message on stderr when a node of several
has no address, a peer sends something that is not ``<rank> <IPv4>``, or the exchange times out.
"""

import argparse
import fcntl
import ipaddress
import os
import re
import socket
import struct
import sys
import time

SIOCGIFADDR = 0x8915  # linux/sockios.h: the interface's (first) IPv4 address
PORT = 29401


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def interface_address(name):
    """The interface's IPv4 address (ioctl SIOCGIFADDR), None when it has none."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        packed = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
        return socket.inet_ntoa(packed[20:24])
    except OSError:
        return None
    finally:
        s.close()


def natural(name):
    """Sort key that puts mlx5_2 before mlx5_10 (the facts' ``envbuild.facts.ib`` uses the same)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def port_interfaces(sys_root="/sys"):
    """``[(port, interface)]`` of the active InfiniBand/RoCE ports, in device and port order
    (natural: mlx5_2 before mlx5_10)."""
    base = os.path.join(sys_root, "class", "infiniband")
    out = []
    for dev in sorted(os.listdir(base), key=natural) if os.path.isdir(base) else []:
        ports_dir = os.path.join(base, dev, "ports")
        ports = sorted((p for p in os.listdir(ports_dir) if p.isdigit()), key=int) if os.path.isdir(ports_dir) else []
        net_dir = os.path.join(base, dev, "device", "net")
        ipoib = sorted(os.listdir(net_dir)) if os.path.isdir(net_dir) else []
        for i, port in enumerate(ports):
            state = _read(os.path.join(ports_dir, port, "state"))
            if state.split(":", 1)[-1].strip().upper() != "ACTIVE":
                continue
            roce = _read(os.path.join(ports_dir, port, "gid_attrs", "ndevs", "0"))
            netdev = roce or (ipoib[i] if i < len(ipoib) else "")
            if netdev:
                out.append(("%s:%s" % (dev, port), netdev))
    return out


def own_address(sys_root="/sys", address_of=interface_address):
    for _port, netdev in port_interfaces(sys_root):
        addr = address_of(netdev)
        if addr:
            return addr
    return None


def _checked(line, nnodes):
    parts = line.split()
    if len(parts) != 2 or not parts[0].isdigit() or not 0 < int(parts[0]) < nnodes:
        raise ValueError("expected '<node rank 1..%d> <IPv4>', got %r" % (nnodes - 1, line[:80]))
    ipaddress.IPv4Address(parts[1])
    return int(parts[0]), parts[1]


def _lines(conn):
    return conn.makefile("r", encoding="ascii", newline="\n")


def gather(rank, nnodes, address, master, port, timeout):
    """The address of every node, in node-rank order (node 0 collects and answers)."""
    deadline = time.time() + timeout
    if nnodes == 1:
        return [address]
    if rank == 0:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("", port))
        server.listen(nnodes)
        server.settimeout(max(1.0, deadline - time.time()))
        by_rank, peers = {0: address}, []
        try:
            while len(by_rank) < nnodes:
                conn, _ = server.accept()
                conn.settimeout(max(1.0, deadline - time.time()))
                peer_rank, peer_addr = _checked(_lines(conn).readline().strip(), nnodes)
                if peer_rank in by_rank:
                    raise ValueError("node rank %d sent its address twice" % peer_rank)
                by_rank[peer_rank] = peer_addr
                peers.append(conn)
            everyone = [by_rank[r] for r in range(nnodes)]
            for conn in peers:
                conn.sendall((",".join(everyone) + "\n").encode("ascii"))
        finally:
            for conn in peers:
                conn.close()
            server.close()
        return everyone
    while True:
        try:
            conn = socket.create_connection((master, port), timeout=max(1.0, deadline - time.time()))
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(1.0)
    try:
        conn.sendall(("%d %s\n" % (rank, address)).encode("ascii"))
        answer = _lines(conn).readline().strip()
    finally:
        conn.close()
    everyone = answer.split(",") if answer else []
    if len(everyone) != nnodes:
        raise ValueError("node 0 answered %d addresses for %d nodes" % (len(everyone), nnodes))
    for addr in everyone:
        ipaddress.IPv4Address(addr)
    return everyone


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--per-node", type=int, required=True, help="ranks per node (each gets its node's address)")
    p.add_argument("--port", type=int, default=PORT, help="the port node 0 listens on [%(default)s]")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the other nodes")
    p.add_argument("--sys", dest="sys_root", default="/sys", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    env = os.environ
    try:
        nnodes, rank = int(env.get("ENVBUILD_NNODES", "1")), int(env.get("ENVBUILD_NODE_RANK", "0"))
        address = own_address(args.sys_root)
        if address is None:
            if nnodes > 1:
                raise ValueError("node rank %d has no IPv4 address on an active InfiniBand/RoCE port "
                                 "(/sys/class/infiniband/*/ports/*/state)" % rank)
            address = "127.0.0.1"
        everyone = gather(rank, nnodes, address, env.get("ENVBUILD_MASTER_ADDR", "127.0.0.1"), args.port,
                          args.timeout)
    except (OSError, ValueError) as exc:
        sys.stderr.write("envbuild ib_addresses: %s\n" % exc)
        return 1
    print(",".join(addr for addr in everyone for _ in range(args.per_node)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
