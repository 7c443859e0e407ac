"""InfiniBand / RoCE facts from /sys/class/infiniband (preferred) or ``ibstat``.

Devices are named like NCCL_IB_HCA entries: "mlx5_0:1" (device:port).
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
        "elif command -v ibstat >/dev/null 2>&1; then ibstat\n"
        "else exit 127; fi",
    ),
]

_SYS = re.compile(r"^/sys/class/infiniband/([^/]+)/ports/(\d+)/(state|rate):(.*)$")


def _state(value: str) -> str:
    """"4: ACTIVE" -> "ACTIVE"; "Active" -> "ACTIVE"."""
    return value.split(":", 1)[-1].strip().upper()


def parse_sys_infiniband(text: str) -> list[IbDevice]:
    """``grep -H . /sys/class/infiniband/*/ports/*/{state,rate}`` -> devices per port."""
    ports: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        m = _SYS.match(line.strip())
        if m:
            ports.setdefault(f"{m.group(1)}:{m.group(2)}", {})[m.group(3)] = m.group(4).strip()
    return [
        IbDevice(name=name, state=_state(v["state"]) if "state" in v else None, rate=v.get("rate"))
        for name, v in sorted(ports.items())
    ]


def parse_ibstat(text: str) -> list[IbDevice]:
    """``ibstat`` output ("CA 'mlx5_0'" blocks with "Port N:" sub-blocks) -> devices per port."""
    devices, ca, port, info = [], None, None, {}

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
