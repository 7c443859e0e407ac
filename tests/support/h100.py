"""The lent H100 node as captured (tests/fixtures/nodes/h100-ubuntu2404-cuda13): its whole facts
probe, assembled and refined by the h100-venv profile, as the recipe tests of the -h100 variants
check them against."""

from __future__ import annotations

from envbuild.facts.assemble import assemble
from envbuild.facts.profile import refine
from envbuild.facts.script import split_sections
from envbuild.targets import load_target
from support.paths import FIXTURES

CAPTURE = FIXTURES / "nodes" / "h100-ubuntu2404-cuda13" / "facts-probe.txt"


def h100_node():
    """(the h100-venv target, the captured node's facts refined by it)."""
    target = load_target("h100-venv")
    return target, refine(target, assemble(split_sections(CAPTURE.read_text()), "h100-node"))
