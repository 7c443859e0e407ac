"""Observed state: what is really installed in an environment, and drift from the lock/plan.

* ``observe_script()``: text of the stdlib-only script run on the node with the env's python
  (``envbuild/node/observe.py``).
* ``observe_args(expected)``: its command-line arguments for one node's plan.
* ``parse_observed(text)`` -> ``Observed``; ``compare(lock, plan, observed)`` -> ``[Drift]`` (pure).
"""

from __future__ import annotations


from envbuild.actions.nodestate import NODE, node_command
from envbuild.observe.compare import compare, compare_expected
from envbuild.observe.expected import Expected, expected_state, read_lock
from envbuild.observe.model import OBSERVED_SCHEMA, Drift, Observed, parse_observed

SCRIPT = NODE / "observe.py"

__all__ = ["OBSERVED_SCHEMA", "Drift", "Expected", "Observed", "compare", "compare_expected",
           "expected_state", "observe_args", "observe_command", "observe_script", "parse_observed",
           "read_lock"]


def observe_script() -> str:
    """The node-side observe script (stdlib only, the floor of envbuild.node: ``PYTHON_FLOOR``)."""
    return SCRIPT.read_text()


def observe_args(exp: Expected) -> list[str]:
    """Arguments of the observe script for one expected environment."""
    args = ["--prefix", exp.prefix or "."]
    for name, dest in sorted(exp.sources.items()):
        args += ["--source", f"{name}={dest}"]
    if exp.env_file:
        args += ["--env-file", exp.env_file]
    return args


def observe_command(python: str, args: list[str]) -> str:
    """One shell command that runs the script with ``python`` without copying a file first (the
    node package carried in the command, ``envbuild.actions.nodestate.node_command``)."""
    return node_command(python, "observe", args, flags=())
