"""Node facts with an InfiniBand port, for plans of recipes whose patches hold
``{inventory.ib_addresses}`` (megatronapp): a target profile knows that its nodes have
InfiniBand, never the cluster's addresses, so the plan/render/launch goldens give each node one
active IPoIB port with an address of the documentation range (RFC 5737, 192.0.2.0/24)."""

from __future__ import annotations

from envbuild.facts.model import IbDevice
from envbuild.facts.profile import from_target

EXAMPLE_ADDRESS = "192.0.2.10"


def with_ib(facts, address: str = EXAMPLE_ADDRESS):
    """``facts`` with one active IPoIB port (mlx5_0:1 -> ib0) holding ``address``."""
    port = IbDevice(name="mlx5_0:1", state="ACTIVE", rate="200 Gb/sec (4X HDR)", netdev="ib0", ipv4=[address])
    return facts.model_copy(update={"infiniband": [port]})


def profile_facts(target):
    """The target's profile facts; a target with InfiniBand gets the example port."""
    facts = from_target(target)
    return with_ib(facts) if target.infiniband else facts
