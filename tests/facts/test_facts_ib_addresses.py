"""InfiniBand/RoCE ports with their interface and IPv4 addresses: the `infiniband` probe's output
on a node with an IPoIB port, a RoCE port and a port that is down
(tests/fixtures/nodes/edge-cases/sys-infiniband-addresses.txt), through the pure parser."""

from __future__ import annotations


from envbuild.facts import ib
from envbuild.facts.probe import Probe
from support.paths import FIXTURES

EDGE = FIXTURES / "nodes" / "edge-cases"


def test_ports_get_their_interface_and_addresses():
    devs = ib.parse_infiniband((EDGE / "sys-infiniband-addresses.txt").read_text())
    assert [(d.name, d.state, d.netdev, d.ipv4) for d in devs] == [
        ("mlx5_0:1", "ACTIVE", "ib0", ["192.168.0.2"]),  # IPoIB: device/net/ib0
        ("mlx5_1:1", "ACTIVE", "eth2", ["172.16.3.9"]),  # RoCE: gid_attrs/ndevs/0
        ("mlx5_2:1", "DOWN", "ib1", ["192.168.1.2"]),
    ]
    assert ib.ib_address(devs) == "192.168.0.2"  # first active port with an address
    assert ib.ib_address(devs[1:]) == "172.16.3.9"
    assert ib.ib_address(devs[2:]) is None  # a port that is down is never used


def test_listings_without_addresses_stay_as_before():
    devs = ib.parse_infiniband((EDGE / "sys-infiniband.txt").read_text())
    assert [(d.netdev, d.ipv4) for d in devs] == [(None, []), (None, [])]
    assert ib.ib_address(devs) is None


def test_ip_addr_lines():
    text = ("1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n"
            "7: ib0.8001@ib0    inet 10.0.0.5/16 brd 10.0.255.255 scope global ib0.8001\\       valid_lft forever\n"
            "4: ib0    inet 192.168.0.2/24 brd 192.168.0.255 scope global ib0\\       valid_lft forever\n"
            "4: ib0    inet 192.168.0.3/24 scope global secondary ib0\\       valid_lft forever\n")
    assert ib.parse_ipv4(text) == {"lo": ["127.0.0.1"], "ib0.8001": ["10.0.0.5"],
                                   "ib0": ["192.168.0.2", "192.168.0.3"]}


def test_the_probe_asks_for_interfaces_and_addresses():
    probe: Probe = ib.PROBES[0]
    assert "/device/net/*" in probe.command and "gid_attrs/ndevs/0" in probe.command
    assert "ip -o -4 addr show" in probe.command
