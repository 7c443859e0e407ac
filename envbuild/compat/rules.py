"""The compatibility table: every row envbuild checks before building anything.

Rows live in three modules by subject (``rules_wheel``: the torch wheel; ``rules_build``:
nvcc, Apex, Megatron, metaseq; ``rules_node``: interpreter, glibc, IB, runtime, scheduler).
Each row is a :class:`envbuild.compat.rule.Rule` with when/what/why/source/fix/severity.
"""

from __future__ import annotations

from envbuild.compat import rules_build, rules_node, rules_wheel
from envbuild.compat.rule import Rule, Severity

RULES: list[Rule] = [*rules_wheel.RULES, *rules_build.RULES, *rules_node.RULES]


def rule(rule_id: str) -> Rule:
    """The row with ``rule_id`` (KeyError if none)."""
    for r in RULES:
        if r.id == rule_id:
            return r
    raise KeyError(rule_id)


__all__ = ["RULES", "Rule", "Severity", "rule"]
