"""Placeholders in recipe patches, filled at plan time from node facts or the inventory.

A patch's ``old``/``new`` may hold ``{facts.<name>}`` (a scalar fact of the node being
planned, e.g. ``{facts.home}``) or ``{inventory.<name>}`` (a value computed from every node of
the run, in inventory order). Known inventory values:

* ``ib_addresses``: one C++ string literal per global rank, ``"10.0.0.1", "10.0.0.1", ...``:
  each node's RDMA CM address (``envbuild.facts.ib.ib_address``: the first IPv4 address of an
  active InfiniBand/RoCE port) repeated once per GPU of that node (ranks are laid out node by
  node, as torchrun numbers them). Addresses are checked to be IPv4 addresses before they are
  written into source code.

``fill_patch`` returns the filled text and raises ``InputError`` naming the patch and the
placeholder when any is left: a plan never carries an unfilled placeholder to a node.

    >>> fill("ips = {inventory.ib_addresses};", None, {"ib_addresses": '"10.0.0.1"'})
    ('ips = "10.0.0.1";', [])
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from envbuild.errors import InputError
from envbuild.facts.ib import ib_address

PLACEHOLDER_RE = re.compile(r"\{(facts|inventory)\.([A-Za-z_][A-Za-z0-9_]*)\}")
INVENTORY_NAMES = ("ib_addresses",)


@dataclass(frozen=True)
class Inventory:
    """Values of ``{inventory.<name>}`` for one run, and why the missing ones are missing."""

    values: dict[str, str]
    missing: dict[str, str]
    nodes: int = 0

    def describe(self, name: str) -> str:
        return self.missing.get(name, f"{name} is not a known inventory value "
                                      f"(known: {', '.join(INVENTORY_NAMES)})")


def placeholders(text: str | None) -> list[str]:
    """The placeholders in ``text`` ("inventory.ib_addresses"), in order, without repeats."""
    seen: list[str] = []
    for m in PLACEHOLDER_RE.finditer(text or ""):
        name = f"{m.group(1)}.{m.group(2)}"
        if name not in seen:
            seen.append(name)
    return seen


def _node_name(facts) -> str:
    return getattr(facts, "host", None) or "node"


def inventory_values(nodes: list) -> Inventory:
    """The inventory values of ``nodes`` (``NodeFacts`` in inventory order)."""
    values: dict[str, str] = {}
    missing: dict[str, str] = {}
    literals: list[str] = []
    problems: list[str] = []
    for facts in nodes:
        addr = ib_address(list(facts.infiniband))
        ranks = len(facts.gpus)
        if addr is None:
            ports = ", ".join(f"{d.name} {d.state or '?'}" + (f" {d.netdev}" if d.netdev else "")
                              for d in facts.infiniband) or "none"
            problems.append(f"{_node_name(facts)} has no IPv4 address on an active InfiniBand/RoCE "
                            f"port (facts.infiniband: {ports})")
            continue
        try:
            ipaddress.IPv4Address(addr)
        except ValueError:
            problems.append(f"{_node_name(facts)}: {addr!r} is not an IPv4 address")
            continue
        if ranks == 0:
            problems.append(f"{_node_name(facts)} lists no GPUs, so its ranks are unknown (facts.gpus)")
            continue
        literals += [f'"{addr}"'] * ranks
    if not nodes:
        problems.append("no node facts")
    if problems:
        missing["ib_addresses"] = "; ".join(problems)
    else:
        values["ib_addresses"] = ", ".join(literals)
    return Inventory(values=values, missing=missing, nodes=len(nodes))


def _fact_value(facts, name: str) -> str | None:
    value = getattr(facts, name, None) if facts is not None else None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    return str(value)


def fill(text: str | None, facts, inventory: dict[str, str]) -> tuple[str | None, list[str]]:
    """``text`` with every placeholder it can fill filled, and the ones left (in order)."""
    if text is None:
        return None, []
    left: list[str] = []

    def sub(m: re.Match) -> str:
        scope, name = m.group(1), m.group(2)
        value = inventory.get(name) if scope == "inventory" else _fact_value(facts, name)
        if value is None:
            if f"{scope}.{name}" not in left:
                left.append(f"{scope}.{name}")
            return m.group(0)
        return value

    return PLACEHOLDER_RE.sub(sub, text), left


def fill_patch(patch, facts, inventory: Inventory) -> tuple[str | None, str | None]:
    """``(old, new)`` of ``patch`` (a recipe ``Patch``) filled; InputError when any placeholder
    is left, naming the patch, the placeholder and why its value is missing."""
    old, left_old = fill(patch.old, facts, inventory.values)
    new, left_new = fill(patch.new, facts, inventory.values)
    left = left_old + [p for p in left_new if p not in left_old]
    if left:
        why = "; ".join(inventory.describe(p.split(".", 1)[1]) if p.startswith("inventory.")
                        else f"the node's facts have no scalar {p.split('.', 1)[1]!r}" for p in left)
        raise InputError(
            f"patch {patch.id} ({patch.component}:{patch.file}) still holds the placeholder "
            f"{', '.join('{' + p + '}' for p in left)}: {why}",
            hint="plan with the facts of every node of the run (`envbuild facts --hosts ...` or "
                 "--inventory), whose InfiniBand ports have IPv4 addresses; a plan never sends "
                 "an unfilled placeholder to a node")
    return old, new
