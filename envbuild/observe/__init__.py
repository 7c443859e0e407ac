"""Observed state: what is really installed in an environment, and drift from the lock/plan.

* ``observe_script()``: text of the stdlib-only script run on the node with the env's python
  (``envbuild/node/observe.py``).
* ``observe_args(expected)``: its command-line arguments for one node's plan;
  ``image_observe_command(plan)``: the command that runs it inside a container node's image.
* ``parse_observed(text)`` -> ``Observed``; ``compare(lock, plan, observed)`` -> ``[Drift]`` (pure).
"""

from __future__ import annotations

import shlex

from envbuild.actions.nodestate import NODE, node_command
from envbuild.actions.steps import engine_env, engine_run_argv
from envbuild.observe.compare import compare, compare_expected
from envbuild.observe.expected import Expected, expected_state, read_lock
from envbuild.observe.model import OBSERVED_SCHEMA, Drift, Observed, parse_observed

SCRIPT = NODE / "observe.py"

__all__ = ["OBSERVED_SCHEMA", "Drift", "Expected", "Observed", "compare", "compare_expected",
           "expected_state", "image_observe_command", "observe_args", "observe_command", "observe_script", "parse_observed",
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


def image_observe_command(plan) -> str:
    """The shell command that runs envbuild's observe script inside the plan's image (a
    throwaway container without network): what observed.json holds for a container node."""
    p = plan.image().params
    exp = Expected(prefix=p.prefix, sources=dict(p.sources), env_file=p.env_file)
    words = ["env", *(f"{k}={v}" for k, v in engine_env(p.engine).items()), *engine_run_argv(p.engine, p.tag, [])]
    return shlex.join(words) + " " + observe_command(f"{p.prefix}/bin/python", observe_args(exp))
