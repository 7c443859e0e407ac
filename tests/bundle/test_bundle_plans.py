"""``envbuild bundle`` plans every node it is given (a facts file of several nodes), as
provision would: each node's plan with the ``{inventory.*}`` values of all of them. Two pods of
MegatronApp with the address list filled at plan time (tests/support/ib_inventory.planned_addresses_recipe):
the ib-addresses patch of each pod's plan lists both pods' InfiniBand addresses (planned alone,
a pod would list only its own)."""

from __future__ import annotations

from envbuild.bundle.pack import node_plans
from envbuild.facts.profile import from_target
from envbuild.plan.build import PlanOptions
from envbuild.plan.resolve import resolve
from envbuild.targets import load_target
from support.ib_inventory import planned_addresses_recipe, with_ib

PODS = (("pod-0", "192.0.2.10"), ("pod-1", "192.0.2.11"))  # RFC 5737 documentation addresses


def test_each_pod_is_planned_with_every_pods_address() -> None:
    rec, tgt = planned_addresses_recipe(), load_target("rtx4090-pod")
    base = from_target(tgt)
    facts = [with_ib(base.model_copy(update={"host": host}), addr) for host, addr in PODS]
    lock = None  # the shipped lock is megatronapp's own recipe's
    plans = node_plans(rec, tgt, facts, lock, None)
    assert [p.host for p in plans] == ["pod-0", "pod-1"]
    for plan in plans:
        text = plan.to_json()
        assert all(addr in text for _, addr in PODS), plan.host
    alone = resolve(rec, tgt, facts[0], lock, PlanOptions(host="pod-0")).plan.to_json()
    assert "192.0.2.11" not in alone  # what planning only facts[0] would have packed
