"""InfiniBand / RoCE facts from /sys/class/infiniband (preferred) or ``ibstat``.

Devices are named like NCCL_IB_HCA entries: "mlx5_0:1" (device:port).

Each port also gets the network interface RDMA CM reaches it through and that interface's
IPv4 addresses (``netdev``, ``ipv4``): an IPoIB interface is listed under the device's
``device/net/`` folder, a RoCE port names its interface in ``gid_attrs/ndevs/0``, and
``ip -o -4 addr show`` gives the addresses. Programs that connect ranks with rdma_cm over IP
(MegatronApp's shm_tensor_new_rdma) need exactly these addresses (``ib_address``).
"""

from __future__ import annotations

import re

from envbuild.facts.model import IbDevice
from envbuild.facts.probe import Probe

PROBES = [
    Probe(
        "infiniband",
        "if [ -d /sys/class/infiniband ] && ls /sys/class/infiniband/*/ports/*/state >/dev/null 2>&1; then\n"
        "  grep -H . /sys/class/infiniband/*/ports/*/state /sys/class/infiniband/*/ports/*/rate 2>/dev/null\n"
        "  ls -d /sys/class/infiniband/*/device/net/* 2>/dev/null\n"
        "  grep -H . /sys/class/infiniband/*/ports/*/gid_attrs/ndevs/0 2>/dev/null\n"
        "  ip -o -4 addr show 2>/dev/null || true\n"
        "elif command -v ibstat >/dev/null 2>&1; then ibstat\n"
        "else exit 127; fi",
    ),
]

_SYS = re.compile(r"^/sys/class/infiniband/([^/]+)/ports/(\d+)/(state|rate):(.*)$")
_NET = re.compile(r"^/sys/class/infiniband/([^/]+)/device/net/([^/\s]+)$")  # IPoIB (ls -d)
_NDEV = re.compile(r"^/sys/class/infiniband/([^/]+)/ports/(\d+)/gid_attrs/ndevs/0:(\S+)$")  # RoCE
_INET = re.compile(r"^\d+:\s+([^\s@:]+)(?:@\S+)?:?\s+inet\s+(\d{1,3}(?:\.\d{1,3}){3})/\d+")  # ip -o -4 addr


def _state(value: str) -> str:
    """"4: ACTIVE" -> "ACTIVE"; "Active" -> "ACTIVE"."""
    return value.split(":", 1)[-1].strip().upper()


def parse_ipv4(text: str) -> dict[str, list[str]]:
    """``ip -o -4 addr show`` lines -> ``{interface: [IPv4 address, ...]}`` in listed order."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = _INET.match(line.strip())
        if m:
            out.setdefault(m.group(1), []).append(m.group(2))
    return out


def parse_netdevs(text: str, ports: list[str]) -> dict[str, str]:
    """``{"mlx5_0:1": "ib0"}``: RoCE ports from ``gid_attrs/ndevs/0``, IPoIB interfaces from
    ``device/net/`` (a device's interfaces paired with its ports in sorted order)."""
    out: dict[str, str] = {}
    by_device: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        m = _NDEV.match(line)
        if m:
            out[f"{m.group(1)}:{m.group(2)}"] = m.group(3)
            continue
        m = _NET.match(line)
        if m:
            by_device.setdefault(m.group(1), []).append(m.group(2))
    for device, nets in by_device.items():
        own = sorted((p for p in ports if p.split(":")[0] == device), key=lambda p: int(p.split(":")[1]))
        for port, net in zip(own, sorted(nets)):
            out.setdefault(port, net)
    return out


def parse_sys_infiniband(text: str) -> list[IbDevice]:
    """``grep -H . /sys/class/infiniband/*/ports/*/{state,rate}`` (plus the interface listing
    and ``ip -o -4 addr show`` of the probe) -> devices per port with their IPv4 addresses."""
    ports: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        m = _SYS.match(line.strip())
        if m:
            ports.setdefault(f"{m.group(1)}:{m.group(2)}", {})[m.group(3)] = m.group(4).strip()
    netdevs = parse_netdevs(text, list(ports))
    addresses = parse_ipv4(text)
    return [
        IbDevice(name=name, state=_state(v["state"]) if "state" in v else None, rate=v.get("rate"),
                 netdev=netdevs.get(name), ipv4=addresses.get(netdevs.get(name, ""), []))
        for name, v in sorted(ports.items())
    ]


def natural(name: str) -> list:
    """Sort key that puts "mlx5_2:1" before "mlx5_10:1" (``envbuild/node/ib_addresses.py``,
    which a pod runs at start, orders the ports the same way)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def ib_address(devices: list[IbDevice]) -> str | None:
    """The node's RDMA CM address: the first IPv4 address of an ACTIVE port (ports in natural
    order, "mlx5_2:1" before "mlx5_10:1"), or None when no active port has one."""
    for dev in sorted(devices, key=lambda d: natural(d.name)):
        if (dev.state or "").upper().endswith("ACTIVE") and dev.ipv4:
            return dev.ipv4[0]
    return None


def parse_ibstat(text: str) -> list[IbDevice]:
    """``ibstat`` output ("CA 'mlx5_0'" blocks with "Port N:" sub-blocks) -> devices per port."""
    devices: list[IbDevice] = []
    ca: str | None = None
    port: str | None = None
    info: dict[str, str] = {}

    def flush():
        if ca is not None and port is not None:
            rate = info.get("rate")
            devices.append(
                IbDevice(name=f"{ca}:{port}", state=_state(info["state"]) if "state" in info else None,
                         rate=f"{rate} Gb/sec" if rate and rate.isdigit() else rate)
            )

    for line in text.splitlines():
        m = re.match(r"^CA '([^']+)'", line)
        if m:
            flush()
            ca, port, info = m.group(1), None, {}
            continue
        m = re.match(r"^\s+Port (\d+):\s*$", line)
        if m:
            flush()
            port, info = m.group(1), {}
            continue
        if port is not None:
            key, sep, value = line.strip().partition(":")
            if sep and key.lower() in ("state", "rate"):
                info[key.lower()] = value.strip()
    flush()
    return devices


def parse_infiniband(text: str) -> list[IbDevice]:
    """Either format, recognised by its content."""
    return parse_sys_infiniband(text) if "/sys/class/infiniband/" in text else parse_ibstat(text)
