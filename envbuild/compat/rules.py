"""The compatibility table: every row envbuild checks before building anything.

Rows live in modules by subject: ``rules_wheel`` (the torch wheel: variants, Python, archs,
driver), ``rules_build`` (nvcc vs GPU and torch), ``rules_apex`` (the Apex pin),
``rules_source`` (Megatron, metaseq, PyPI names, setuptools, NumPy) and ``rules_node``
(interpreter, glibc, IB, container runtime, scheduler, GPU count), ``rules_recipe`` (the
recipe itself: a drafted recipe's undecided fields).
Each row is a :class:`envbuild.compat.rule.Rule` with when/what/why/source/fix/severity.
"""

from __future__ import annotations

from envbuild.compat import (rules_apex, rules_build, rules_deepspeed, rules_node, rules_recipe, rules_source,
                             rules_wheel)
from envbuild.compat.rule import Rule, Severity

RULES: list[Rule] = [*rules_wheel.RULES, *rules_build.RULES, *rules_apex.RULES, *rules_source.RULES,
                     *rules_node.RULES, *rules_deepspeed.RULES, *rules_recipe.RULES]


def rule(rule_id: str) -> Rule:
    """The row with ``rule_id`` (KeyError if none)."""
    for r in RULES:
        if r.id == rule_id:
            return r
    raise KeyError(rule_id)


__all__ = ["RULES", "Rule", "Severity", "rule"]
