"""nodes/<host>/result.json (``NodeResult``): how provisioning ended on one node.

Written by ``envbuild.provision.results.NodeResults.finish`` (and an interrupt's record) through
``RunWriter.node_result``. The node's other files have their own models: facts.json
``envbuild.facts.model.NodeFacts``, preflight.json ``envbuild.compat.check.Verdict``, plan.json
``envbuild.plan.model.Plan``, observed.json ``envbuild.observe.model.Observed``; smoke.json
``envbuild.record.smoke.SmokeRecord``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from envbuild.record.base import Number, Record

NodeStatus = Literal["ok", "failed", "refused", "unreachable", "interrupted", "error"]


class NodeResult(Record):
    status: NodeStatus
    failed_step: str | None = None
    command: str | None = None
    rc: int | None = None
    log_tail: str = ""
    changed: list[str] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)
    duration_s: Number | None = None
    insecure: bool = False  # SSH host keys were not checked for this node (--insecure)
    signal: str | None = None  # the signal that interrupted it
    # steps run again because their effect did not hold (the node's Envbuild state answer)
    effect_failed: dict[str, str | None] = Field(default_factory=dict)  # step -> what did not hold
    repair: list[str] = Field(default_factory=list)  # steps run again as a repair (reinstall)
    rerun_reasons: dict[str, str | None] = Field(default_factory=dict)  # step -> why it runs again
    # provision --fanout: the node its copy of the fleet's archive came from, or "controller (why)"
    fleet_from: str | None = None
