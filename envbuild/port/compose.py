"""The variant a port writes: the published recipe's data with every change made by the
stack, the Apex policy, the package table and the known fixes read from the pinned trees, each
change a deviation (published, problem, instead, source, handled_by, test), and what port
cannot decide as ``undecided:`` entries.

``compose`` runs the steps in order on a ``Port`` (``envbuild.port.state``): the name, stack,
environment, packages and the day unpinned requirements resolve as of (``environment``), the
trees (``fixes.read_trees``), a source whose commit the mirror lacks moved past (``vendored``),
the packages read at their release tag and Apex (``sources``), the known fixes (``fixes``), the
launch and the downloads (``launch``), the expected resources (``resources``), then ``settle``.
It reads git mirrors and nothing else (pure planning: nothing is installed, locked or run).
"""

from __future__ import annotations

import copy
from pathlib import Path

from envbuild.facts.model import NodeFacts
from envbuild.port.environment import (
    port_environment,
    port_header,
    port_packages,
    port_resolve_as_of,
    port_torch,
)
from envbuild.port.fixes import port_fixes, read_trees
from envbuild.port.launch import port_data, port_launch
from envbuild.port.resources import port_resources
from envbuild.port.sources import port_apex, port_package_sources
from envbuild.port.stack import Stack
from envbuild.port.state import Port
from envbuild.port.undecided import port_undecided
from envbuild.port.vendored import port_unread_sources
from envbuild.recipes.schema import Recipe
from envbuild.targets.schema import Target

#: the recipe field an error row of the final preflight points at
RULE_FIELDS = {"too-few-gpus": "benchmark.needs_gpus", "python-absent": "python", "scheduler-mismatch": "launcher",
               "container-runtime-missing": "environment", "conda-module-absent": "environment",
               "nvcc-major-mismatch": "packages", "rdma-needs-infiniband": "sources",
               "megatron-fused-kernels-arch": "sources", "megatron-no-setup-py": "sources",
               "metaseq-megatron-branch": "sources", "fairscale-version-string-compare": "sources"}


def settle(p: Port) -> Recipe:
    """Validate the variant and run the preflight on it: every error row left (but the
    undecided row itself) becomes an undecided entry, so check refuses only those."""
    from envbuild.compat.check import preflight

    p.data["deviations"] = p.deviations
    p.data["undecided"] = p.undecided
    verdict = preflight(Recipe.model_validate({**p.data, "undecided": []}), p.target, p.facts)
    for v in verdict.errors:
        p.leave(RULE_FIELDS.get(v.rule, "packages"), f"check row {v.rule}: {v.message} (fix: {v.fix})")
    p.data["undecided"] = p.undecided
    if not p.undecided:
        p.data.pop("undecided")
    return Recipe.model_validate(p.data)


STEPS = (port_header, port_torch, port_environment, port_packages, port_resolve_as_of, read_trees,
         port_unread_sources, port_package_sources, port_apex, port_fixes, port_launch, port_data, port_resources,
         port_undecided)


def compose(recipe: Recipe, raw: dict, target: Target, facts: NodeFacts, stack: Stack,
            mirror: Path | None) -> Port:
    """Run every step on a copy of the published data; the result is validated (``settle``)."""
    p = Port(recipe=recipe, raw=raw, target=target, facts=facts, stack=stack, mirror=mirror, data=copy.deepcopy(raw))
    for step in STEPS:
        step(p)
    settle(p)
    return p
