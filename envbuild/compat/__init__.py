"""Compatibility knowledge as tables, and the preflight that evaluates them.

``torch_wheels`` (published torch variants), ``cuda_arch`` (GPU arch / toolkit / driver),
``commits`` (dated Apex/Megatron/metaseq commits), ``rules`` (the rule table) and ``check``
(``preflight(recipe, target, facts) -> Verdict``).
"""

from envbuild.compat.check import Verdict, Violation, preflight, preflight_nodes
from envbuild.compat.rules import RULES, Rule

__all__ = ["RULES", "Rule", "Verdict", "Violation", "preflight", "preflight_nodes"]
