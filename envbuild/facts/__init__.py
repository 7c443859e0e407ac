"""Node facts: commands with pure parsers (``parsers``), gathered locally or over SSH."""

from envbuild.facts.model import FACTS_SCHEMA, Gpu, IbDevice, Interpreter, NodeFacts

__all__ = ["FACTS_SCHEMA", "Gpu", "IbDevice", "Interpreter", "NodeFacts"]
