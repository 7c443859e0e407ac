"""The plan flow: the ordered steps a provision would run on each node, with every decision's
reason; nothing is installed.

``plan(PlanRequest(...)) -> PlanOutcome``: the recipe and target (names or YAML paths), the
lock (given, ``$ENVBUILD_LOCKDIR``'s, else the shipped one, when there is one), the node facts
(a facts file, live for ``local``, else the target's profile), then one plan per node resolved
by ``envbuild.plan.resolve`` (pure). A plan whose preflight refuses the node, or that refuses a
step the recipe needs, is returned all the same (the caller prints it) and makes the exit
``INFEASIBLE``, as ``envbuild check`` exits for an infeasible node.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field, replace

from envbuild.catalog import given_as
from envbuild.errors import InputError
from envbuild.plan.build import PlanOptions, prefix_problem
from envbuild.plan.model import Decision, Plan

INFEASIBLE = 1  # as `envbuild check` exits for an infeasible node


@dataclass(frozen=True)
class PlanRequest:
    """``recipe`` (None: the embedded default) on ``target``; ``facts_file`` the node facts,
    ``lock_file``, ``prefix``, ``backend`` over the recipe's environment kind (``base``,
    ``engine_args`` and ``engine_env`` NAME=VALUE entries for a container built on the node),
    ``git_mirror``, ``wheelhouse``, ``data_mirror`` and ``installer`` (auto, pip or uv)."""

    target: str
    recipe: str | None = None
    facts_file: str | None = None
    lock_file: str | None = None
    prefix: str | None = None
    backend: str | None = None
    base: str | None = None
    engine_args: tuple[str, ...] = ()
    engine_env: tuple[str, ...] = ()
    git_mirror: str | None = None
    wheelhouse: str | None = None
    data_mirror: str | None = None
    installer: str = "auto"


@dataclass(frozen=True)
class PlanOutcome:
    """The recipe's name, one plan per node, the nodes whose preflight refuses the recipe
    (``infeasible``), the refused steps per node (``refused``), and the ``envbuild check``
    command that lists every violated rule (the recipe and target as the user named them)."""

    recipe: str
    plans: list[Plan]
    infeasible: list[str] = field(default_factory=list)
    refused: list[tuple[str, Decision]] = field(default_factory=list)
    check_command: str = ""

    @property
    def exit_code(self) -> int:
        """0 every node's plan would run; ``INFEASIBLE`` a preflight or a step refuses it."""
        return INFEASIBLE if self.infeasible or self.refused else 0


def plan(request: PlanRequest) -> PlanOutcome:
    """One plan per node (see the module docstring)."""
    from envbuild.inputs import find_lock, node_facts, recipe_and_target
    from envbuild.plan.placeholders import inventory_values
    from envbuild.plan.resolve import default_backend, fetch_urls, resolve
    from envbuild.provision import controller_uv

    rec, tgt = recipe_and_target(request.recipe, request.target)
    lock = find_lock(rec, tgt, request.lock_file)
    if request.prefix and (why := prefix_problem(request.prefix)):
        raise InputError(f"--prefix {request.prefix}: {why}",
                         hint="give the environment a folder of its own, e.g. /opt/envs/<recipe> or ~/.envbuild/envs/<recipe>")
    opts = PlanOptions(prefix=request.prefix, backend=default_backend(rec, request.backend),
                       git_mirror=request.git_mirror, wheelhouse=request.wheelhouse,
                       fetch_urls=fetch_urls(rec, request.git_mirror, lock), base=request.base,
                       data_mirror=request.data_mirror, installer=request.installer,
                       uv=controller_uv(request.installer), engine_args=tuple(request.engine_args),
                       engine_env=dict(e.split("=", 1) for e in request.engine_env if "=" in e))
    nodes = node_facts(tgt, request.facts_file)
    opts = replace(opts, inventory=inventory_values(nodes))  # {inventory.*}: every node given
    plans = [resolve(rec, tgt, facts, lock, replace(opts, host=facts.host)).plan for facts in nodes]
    return PlanOutcome(recipe=rec.name, plans=plans,
                       infeasible=[p.host for p in plans if (pf := p.preflight()) is not None and not pf.params.feasible],
                       refused=[(p.host, d) for p in plans for d in p.refused()],
                       check_command=f"envbuild check {shlex.quote(given_as(rec))} --target {shlex.quote(given_as(tgt))}")
