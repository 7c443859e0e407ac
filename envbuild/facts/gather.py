"""Gather node facts: run the probe script once per node, split it, assemble ``NodeFacts``.

>>> from envbuild.connect.runners import LocalRunner
>>> facts = gather(LocalRunner())          # doctest: +SKIP
>>> facts.has_gpu, facts.glibc             # doctest: +SKIP
(False, '2.36')
"""

from __future__ import annotations

import shlex
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

from envbuild.connect.nodes import Node
from envbuild.connect.runners import LocalRunner, Runner, SshRunner
from envbuild.errors import EnvironmentProblem
from envbuild.facts.assemble import all_probes, assemble
from envbuild.facts.model import NodeFacts
from envbuild.facts.script import build_script, split_sections


def gather(runner: Runner, *, python: str | None = None, host: str | None = None,
           skip: tuple[str, ...] = ()) -> NodeFacts:
    """Facts of the node behind ``runner`` in one command; ``python`` picks the pip/torch
    interpreter; ``skip`` names probes not to run (provisioning skips ``pip_list``: it observes
    the environment's own packages later)."""
    script = build_script([p for p in all_probes() if p.name not in skip], python=python)
    result = runner.run("sh -c " + shlex.quote(script))
    sections = split_sections(result.stdout)
    if not sections:
        raise EnvironmentProblem(
            f"{host or runner.name}: the facts script printed nothing (exit {result.rc}): "
            + (result.stderr.strip().splitlines() or ["no error output"])[0],
            hint="check that /bin/sh works for this user on the node",
        )
    now = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
    return assemble(sections, host or runner.name, collected_at=now)


def gather_local(*, python: str | None = None) -> NodeFacts:
    """Facts of this machine."""
    return gather(LocalRunner(), python=python)


def gather_one(node: Node, *, python: str | None = None, connect_timeout: int = 10) -> NodeFacts:
    """Facts of one node (one connection, one command), recorded under ``node.name``."""
    if node.is_local:
        return gather(LocalRunner(node.name), python=python, host=node.name)
    runner = SshRunner(node, connect_timeout=connect_timeout)
    try:
        return gather(runner, python=python, host=node.name)
    finally:
        runner.close()


def gather_hosts(
    specs: list[Node], *, python: str | None = None, connect_timeout: int = 10, workers: int = 32
) -> list[NodeFacts | EnvironmentProblem]:
    """Facts of many hosts in parallel, in input order; an unreachable host yields its error
    in its slot instead of facts, and the others still return."""

    def one(spec: Node) -> NodeFacts | EnvironmentProblem:
        try:
            return gather_one(spec, python=python, connect_timeout=connect_timeout)
        except EnvironmentProblem as exc:
            return exc

    if not specs:
        return []
    with ThreadPoolExecutor(max_workers=min(workers, len(specs))) as pool:
        return list(pool.map(one, specs))
