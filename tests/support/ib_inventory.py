"""Node facts with an InfiniBand port, for plans of recipes whose patches hold
``{inventory.ib_addresses}``: a target profile knows that its nodes have InfiniBand, never the
cluster's addresses, so plans give each node one active IPoIB port with an address of the
documentation range (RFC 5737, 192.0.2.0/24).

No shipped recipe fills a patch from the inventory since MegatronApp reads its addresses at run
time (deviation hard-coded-ib-addresses); ``planned_addresses_recipe`` is MegatronApp with the
list filled at plan time instead, the shape the placeholder machinery
(envbuild.plan.placeholders) serves, so that machinery stays tested on a real file shape."""

from __future__ import annotations

from envbuild.facts.model import IbDevice
from envbuild.facts.profile import from_target

EXAMPLE_ADDRESS = "192.0.2.10"


def with_ib(facts, address: str = EXAMPLE_ADDRESS):
    """``facts`` with one active IPoIB port (mlx5_0:1 -> ib0) holding ``address``."""
    port = IbDevice(name="mlx5_0:1", state="ACTIVE", rate="200 Gb/sec (4X HDR)", netdev="ib0", ipv4=[address])
    return facts.model_copy(update={"infiniband": [port]})


# the published list's contents (between the braces), filled from every node's facts
PLANNED_OLD = r"(?<=std::string ips\[\] = \{)[^}]*(?=\}; // infiniband IPs)"


def planned_addresses_recipe():
    """megatronapp whose ib-addresses patch fills the published list at plan time from
    ``{inventory.ib_addresses}`` (one C++ string literal per rank)."""
    from envbuild.recipes import load_recipe

    rec = load_recipe("megatronapp")
    patches = [p.model_copy(update={"old": PLANNED_OLD, "new": "{inventory.ib_addresses}"})
               if p.id == "ib-addresses" else p for p in rec.patches]
    return rec.model_copy(update={"patches": patches})


def profile_facts(target):
    """The target's profile facts; a target with InfiniBand gets the example port."""
    facts = from_target(target)
    return with_ib(facts) if target.infiniband else facts
