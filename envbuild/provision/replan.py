"""Refusals before anything installs, and the plans made again once the nodes are known: an
index a node cannot reach (served by its find-links folder instead), a fleet's pushed wheels."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable

from envbuild import rundir
from envbuild.bundle import offline as bundle_offline, fleet
from envbuild.connect import ssh
from envbuild.connect.nodes import Node
from envbuild.errors import EnvironmentProblem, CheckFailed
from envbuild.facts import reach
from envbuild.lock.schema import normalize
from envbuild.lock.supply import supply_steps
from envbuild.plan import indexes
from envbuild.plan.model import Plan
from envbuild.plan.resolve import resolve
from envbuild.provision.options import ProvisionOptions, check_from_step, node_prefix
from envbuild.record import RunWriter


def refuse_unreachable_indexes(nodes: list[Node], plans: dict[str, Plan]) -> dict[str, dict[str, str]]:
    """EnvironmentProblem (exit 3) naming each index URL a node cannot reach and ``--wheelhouse``,
    instead of pip's retries minutes later (``envbuild.facts.reach``: one probe per node that
    installs from an index other than PyPI; none when the wheelhouse or bundle serves it all)."""
    problems: list[str] = []
    local: dict[str, dict[str, str]] = {}  # node -> {url: find-links folder that serves it}
    for node in nodes:
        urls = indexes.remote_indexes(plans[node.name])
        if urls:
            wants = {u: indexes.wheels_from(plans[node.name], u) for u in urls}
            rc, out, err = ssh.run(node, reach.probe_command(urls, node.python or "python3", wants),
                                   timeout=reach.TIMEOUT_S * len(urls) + 30)
            problems += [f"{node.name} cannot reach {url} ({why})"
                         for url, why in reach.unreachable(urls, rc, out, err).items()]
            if served := reach.local_dirs(out):
                local[node.name] = served
    if problems:
        raise EnvironmentProblem("package index unreachable, nothing installed:\n  - " + "\n  - ".join(problems),
                                 hint="give the wheels another way: --wheelhouse DIR (a folder of wheels on the "
                                      "node, e.g. the CPU torch wheel), or --bundle FILE from `envbuild bundle`")
    return local


def refuse_unverified(plan: Plan, allowed: list[str], lock=None, python: str | None = None,
                      arch: str = "x86_64") -> None:
    """A package without a hash in the lock installs only when named by --allow-unverified.
    With the ``lock`` (and the recipe's ``python``), the refusal names each package's file, why
    it has no hash and the commands that supply it (``envbuild.lock.supply``)."""
    ok = {a.lower() for a in allowed}
    missing = [n for n in plan.unverified() if n.lower() not in ok]
    if not missing:
        return
    entries = {normalize(p.name): p for p in lock.packages} if lock is not None else {}
    found = [entries[normalize(n)] for n in missing if normalize(n) in entries]
    lines = [f"{e.name} {e.version}: {e.reason or 'no file in the lock'}" for e in found]
    supply = [supply_steps(e, plan.recipe, plan.target, python, arch) for e in found
              if python and e.source not in ("preinstalled", "pypi")]
    raise CheckFailed(f"{len(missing)} package(s) have no verified hash in the lock: {', '.join(missing)}"
                      + "".join(f"\n  - {line}" for line in lines),
                      hint="; ".join(supply + ["or accept them one by one with --allow-unverified NAME"
                                               if supply else "re-lock with a reachable index or wheelhouse, "
                                               "or accept them one by one with --allow-unverified NAME"]))


def push_wheels(opts: ProvisionOptions, nodes: list[Node], plans: dict[str, Plan], lock, rd: rundir.RunDir,
                 say: Callable[[str], None]):
    """A fleet (``envbuild.bundle.fleet``): every wheel of ``plans`` fetched once into the
    controller's cache and pushed to the nodes; None (each node uses its index) for one node
    (unless ``--push-wheels``), the controller itself, an offline bundle, a dry run, or a lock
    without a verified file for everything planned. run.json's ``fleet`` says which and why."""
    remote = [n for n in nodes if not n.is_local]
    want = opts.push_wheels if opts.push_wheels is not None else len(remote) > 1
    why = ("--no-push-wheels" if opts.push_wheels is False else "one node" if not want
           else "the controller is the node" if not remote else "an offline bundle" if opts.bundle
           else "a dry run downloads nothing" if opts.dry_run else fleet.unpushable(plans, lock))
    if why:
        RunWriter(rd).update(fleet={"pushed": False, "nodes": len(nodes), "why": why})
        return None
    say(f"{len(remote)} node(s): every wheel once on the controller, pushed to each node")
    staged = fleet.stage_wheels(plans, lock, Path(opts.wheelhouse) if opts.wheelhouse else None,
                                rundir.envbuild_home(), say)
    RunWriter(rd).update(fleet=staged.summary(len(nodes)))
    return staged


def plan_nodes(opts: ProvisionOptions, recipe, target, facts: dict, feasible: list[Node], lock, plan_opts,
               rd: rundir.RunDir, say: Callable[[str], None]) -> dict[str, Plan]:
    """{node: plan}, the same resolution as ``envbuild plan`` (``envbuild.plan.resolve``), each
    checked (hashes, ``--bundle``, ``--from-step``); made again with the node's find-links
    folder as the wheelhouse when it alone serves an unreachable index, and with a fleet's
    pushed wheels. Nothing is installed here; the nodes are only probed for their indexes."""
    def plan_all(plan_opts) -> dict[str, Plan]:
        plans: dict[str, Plan] = {}
        for node in feasible:
            plan = resolve(recipe, target, facts[node.name], lock,
                           replace(plan_opts, host=node.name, node_python=node.python,
                                   prefix=node_prefix(opts.prefix, node.name))).plan
            refuse_unverified(plan, opts.allow_unverified, lock, recipe.python, target.platform.arch)
            bundle_offline.check_plan(opts, plan)  # --bundle: it carries all the plan needs (exit 1)
            # the wheels step exists once the fleet is pushed (below): checked on the final plans
            check_from_step(plan, None if opts.from_step == "wheels" else opts.from_step)
            plans[node.name] = plan
        return plans

    plans = plan_all(plan_opts)
    if not opts.dry_run and feasible:  # before anything installs: every index the plans name answers
        local = refuse_unreachable_indexes(feasible, plans)
        folders = {d for served in local.values() for d in served.values()}
        if local and len(folders) == 1 and opts.wheelhouse is None:
            # pip would fall back to that folder after its retries, uv would not: install from it
            folder = folders.pop()
            say(f"{', '.join(sorted({u for s in local.values() for u in s}))} unreachable; the node's pip "
                f"find-links folder {folder} holds every wheel planned from it: installing from it "
                f"(as --wheelhouse {folder})")
            plan_opts = replace(plan_opts, wheelhouse=folder)
            plans = plan_all(plan_opts)
    pushed = push_wheels(opts, feasible, plans, lock, rd, say)  # a fleet: wheels fetched once here
    if pushed is not None:
        plans = plan_all(replace(plan_opts, fleet=pushed.params))
    for plan in plans.values():
        check_from_step(plan, opts.from_step)
    return plans
