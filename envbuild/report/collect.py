"""collect(run_dir) -> Report: read a run directory and judge it.

Reads the run folder through its typed record (``envbuild.record.RunRecord``): run.json,
recipe.json, lock.lock, launch.json (a run of ``envbuild launch --submit``) and
nodes/<host>/{facts,preflight,plan,result,observed,smoke}.json (any of the node files may be
absent: a refused node has no observed state). Only reads; never touches a node. The
report's ACM badges are judged from the finished report (``envbuild.report.badges``).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from envbuild import __version__
from envbuild.compat.check import Verdict as PreflightVerdict
from envbuild.errors import InputError
from envbuild.facts.model import NodeFacts
from envbuild.node import treecache
from envbuild.observe import Observed, compare_expected, expected_state
from envbuild.observe.compare import same_version
from envbuild.plan.model import Plan
from envbuild.record import LaunchRecord, NodeRecord, RecipeView, RunRecord
from envbuild.record.run import BundleRecord
from envbuild.record.smoke import SmokeRecord
from envbuild.report import bench
from envbuild.smoke.pipeline_trace import computation_order
from envbuild.report.fingerprint import node_fingerprint, node_kind, run_fingerprint
from envbuild.report.badges import assess, repeatability
from envbuild.report.model import (BundleInfo, DecisionRow, Deviation, FactsSummary, ImportCostRow, LaunchJob,
                                   NodeReport, PatchRow, PinRow, PipelineOrder, Preflight, ProvisionedRun, Reason,
                                   RecipeInfo, Report, RunInfo, StepResult, Verdict)

# the badge a PASS must stand beside: Functional. Results Reproduced asks the published figure
# on the published hardware (envbuild.report.badges): a PASS against a same-GPU reference is a
# verdict on the run, never that badge
PASS_NEEDS = ("functional",)


def facts_summary(f: NodeFacts) -> FactsSummary:
    names = sorted({g.name for g in f.gpus if g.name})
    os_name = f.os_pretty or " ".join(x for x in (f.os_id, f.os_version) if x) or None
    return FactsSummary(gpu=", ".join(names) or None, gpu_count=len(f.gpus),
                        compute_capability=", ".join(sorted({g.compute_capability for g in f.gpus})) or None,
                        driver=f.driver_version, driver_cuda=f.driver_cuda, nvcc=f.nvcc,
                        nccl=f.nccl_version, os=os_name, glibc=f.glibc, cpu=f.cpu_model,
                        memory_gib=round(f.memory_gib, 1) if f.memory_gib is not None else None, origin=f.origin)


def preflight_summary(p: PreflightVerdict) -> Preflight:
    """The preflight verdict as the report shows it: every violated row, warnings labelled."""
    problems = [("warning: " if v.severity == "warning" else "") + v.message + (f" (fix: {v.fix})" if v.fix else "")
                for v in p.violations]
    return Preflight(verdict="feasible" if p.feasible else "infeasible", ok=p.feasible, problems=problems)


def pins(exp, obs: Observed) -> list[PinRow]:
    rows = []
    for name, version in exp.packages.items():
        have = obs.packages.get(name)
        ok = have is not None and same_version(version, have)
        rows.append(PinRow(kind="package", name=name, expected=version, observed=have, ok=ok))
    for name, sha in exp.git.items():
        have = obs.git.get(name)
        rows.append(PinRow(kind="git", name=name, expected=sha, observed=have, ok=have == sha))
    for ext in obs.extensions:
        rows.append(PinRow(kind="extension", name=ext.path, expected=None, observed=ext.sha256, ok=True))
    for var, value in exp.env.items():
        have = obs.env.get(var)
        rows.append(PinRow(kind="env", name=var, expected=value, observed=have, ok=have == value))
    return rows


def unverified_packages(plan: Plan | None) -> list[str]:
    """Packages the plan installs without a hash (each allowed by --allow-unverified)."""
    return plan.unverified() if plan is not None else []


def patch_rows(exp, obs: Observed | None, plan: Plan | None) -> list[PatchRow]:
    decided = {}
    for step in (plan.patches() if plan is not None else []):
        p = step.params
        decided[p.id] = ("expect" if p.patch_kind == "expect" else (p.decision or "patched"), step.reason)
    recorded = {p.id: p for p in (obs.patches if obs else [])}
    rows = []
    for pid in sorted(set(decided) | set(recorded) | set(exp.patches)):
        rec = recorded.get(pid)
        outcome, why = decided.get(pid, (None, ""))
        rows.append(PatchRow(id=pid, component=(rec.component if rec else None) or exp.patches.get(pid) or None,
                             decision=outcome, status=rec.status if rec else "not recorded",
                             reason=(rec.reason if rec and rec.reason else why), diff=rec.diff if rec else ""))
    return rows


def _plan_versions(plan: Plan | None) -> tuple[str | None, str | None]:
    """(python, torch) versions a node's plan installs."""
    if plan is None:
        return None, None
    env = plan.environment()
    torch = None
    for step in plan.requirement_installs():
        for r in step.params.requirements:
            if r.name.lower() == "torch":
                torch = r.version
    return env.params.python if env is not None else None, torch


def node_report(record: RunRecord, node_rec: NodeRecord, lock_digest: str | None,
                recipe: RecipeView) -> tuple[NodeReport, list[Reason]]:
    host = node_rec.host
    reasons: list[Reason] = []
    facts, pre, plan, result, obs = (node_rec.facts, node_rec.preflight, node_rec.plan, node_rec.result,
                                     node_rec.observed)
    node = NodeReport(host=host, facts=facts_summary(facts) if facts is not None else None)
    if pre is not None:
        node.preflight = preflight_summary(pre)
        if not node.preflight.ok:
            detail = "; ".join(node.preflight.problems) or node.preflight.verdict
            reasons.append(Reason(kind="preflight", host=host, message=f"preflight refused the node: {detail}"))
    if result is not None:
        node.result = StepResult.model_validate(result.model_dump(include=set(StepResult.model_fields),
                                                                  exclude_none=True))
        if node.result.status != "ok":
            where = f" at step {node.result.failed_step}" if node.result.failed_step else ""
            reasons.append(Reason(kind="step", host=host, message=f"provision {node.result.status}{where}"
                                  + (f" (rc {node.result.rc})" if node.result.rc is not None else "")))
    node.kind = node_kind(facts, *_plan_versions(plan))
    node.decisions = [DecisionRow.model_validate(d.model_dump()) for d in plan.decisions] if plan else []
    node.insecure = result is not None and result.insecure
    node.unverified = unverified_packages(plan)
    exp = expected_state(record.lock, plan)
    if obs is not None:
        node.observed, node.python = True, obs.python
        node.pins = pins(exp, obs)
        node.drift = [d.model_copy(update={"host": host}) for d in compare_expected(exp, obs)]
        node.fingerprint = node_fingerprint(obs, lock_digest)
        reasons += [Reason(kind="drift", host=host, message=d.line()) for d in node.drift]
    elif not node.result or node.result.status == "ok":
        reasons.append(Reason(kind="unobserved", host=host, message="no observed.json: installed state not verified"))
    node.patches = patch_rows(exp, obs, plan)
    smoke = node_rec.smoke if node_rec.smoke is not None and node_rec.smoke.sections() else None
    if smoke is None and node.fingerprint and result is not None and result.status == "ok" and not result.changed:
        smoke, node.evidence_from = carried_smoke(record, host, node.fingerprint)
    if smoke is not None and smoke.collective is not None:
        packed = record.launch.packed if record.launch is not None else None
        rows = []
        for c in smoke.collective.import_cost:
            mine = packed is not None and c.prefix.rstrip("/") == packed.prefix.rstrip("/")
            rows.append(ImportCostRow(**c.model_dump(), from_pack=mine,
                                      from_image=mine and packed.format == "squashfs"))
        node.import_cost = rows
    if smoke is not None:
        node.benchmarks = bench.benchmarks(smoke, recipe.benchmark, node.facts.gpu if node.facts is not None else None)
        node.smoke_ok = bench.section_ok(smoke)
        native = smoke.native
        if native is not None and native.ran is False:
            node.benchmark_not_run = native.reason or "not run"
        judged = native.verdict if native is not None and native.ran is not False else None
        done = judged.completion if judged is not None else None
        before = len(reasons)
        if done is not None and done.state != "complete":
            reasons.append(Reason(kind="benchmark", host=host, message=f"the benchmark run did not complete "
                                  f"({done.state}: {done.detail})"))
        for b in node.benchmarks:
            if b.passed is False and b.threshold is not None:
                cmp = "below" if b.higher_is_better else "above"
                got = f"{b.name} = {b.value:g} {b.unit}".rstrip() if b.value is not None else f"{b.name} missing"
                reasons.append(Reason(kind="benchmark", host=host, message=f"{got}, {cmp} threshold {b.threshold:g}"
                                      if b.value is not None else f"{got} (threshold {b.threshold:g})"))
        # e.g. its metric not in the output
        if judged is not None and judged.passed is False and len(reasons) == before:
            reasons.append(Reason(kind="benchmark", host=host, message=judged.reason or "benchmark failed"))
        reasons += [Reason(kind="smoke", host=host, message=f"smoke {k} not ok")
                    for k, ok in node.smoke_ok.items() if not ok]
    node.pipeline = pipeline_order(node_rec, recipe)
    return node, reasons


def pipeline_order(node_rec: NodeRecord, recipe: RecipeView) -> PipelineOrder | None:
    """The computation order of the last training iteration in the node's benchmark trace, for a
    benchmark whose parser reads MegatronApp's per-micro-batch trace (None otherwise)."""
    if recipe.benchmark is None or recipe.benchmark.parser != "megatronapp":
        return None
    trace = node_rec.path / "smoke" / "native.out"
    if not trace.is_file():
        return None
    order = computation_order(trace.read_text(errors="replace"))
    if order is None:
        return None
    return PipelineOrder.model_validate({**asdict(order), "record": "smoke/native.out"})


def not_judged(nodes: list[NodeReport], recipe: RecipeView, launch: LaunchJob | None,
               smoke_skipped: bool = False) -> list[str]:
    """What keeps a run with no failure from a PASS: each node's benchmark that did not run,
    ran without a threshold, or was not compared; [] when every node's was judged."""
    if recipe.benchmark is None:
        return ["the recipe declares no benchmark: nothing was measured against a threshold"]
    out = []
    for n in nodes:
        rows = [b for b in n.benchmarks if b.name.startswith("native.")]
        if not rows:
            why = n.benchmark_not_run or (("the smoke was not run: provision --no-smoke" if smoke_skipped
                                           else "no smoke ran") if not n.smoke_ok else "no result in smoke.json")
            out.append(f"{n.host}: the recipe's benchmark did not run ({why})")
        for b in rows:
            if b.passed is None:  # the judge's NOT JUDGED, with its reason
                got = f"{b.name} = {b.value:.4g} {b.unit}".rstrip() if b.value is not None else b.name
                out.append(f"{n.host}: {got} recorded, not judged: " + (b.reason.split("not judged: ", 1)[-1]
                                                                          or "the recipe sets no threshold"))
    if launch is not None and launch.passed is None:
        out.append(f"{launch.scheduler} job {launch.job_id or '?'}: {launch.replaced or 'no figure judged'}")
    return out


def carried_smoke(record: RunRecord, host: str, fingerprint: str) -> tuple[SmokeRecord | None, str | None]:
    """(smoke.json, run id) of the newest earlier run in the same runs folder whose node of the
    same name has the same environment fingerprint and a smoke.json: what still holds for an
    environment a run found with nothing to do. (None, None) when there is none."""
    runs_dir = record.path.parent
    runs = sorted((p for p in runs_dir.iterdir() if p.is_dir() and not p.is_symlink()
                   and p.name < record.path.name), reverse=True) if runs_dir.is_dir() else []
    for earlier in runs:
        try:
            there = RunRecord.load(earlier)
            node = there.node(host)
            if node is None or node.smoke is None or not node.smoke.sections() or node.observed is None:
                continue
            if node_fingerprint(node.observed, there.lock_digest) == fingerprint:
                return node.smoke, earlier.name
        except (InputError, OSError):
            continue
    return None, None


def provisioning_run(record: RunRecord, nodes: list[NodeReport]) -> ProvisionedRun | None:
    """The run that provisioned what a no-op run found done: the newest earlier run in the same
    runs folder that finished ok, started Ansible, installed something, and whose every node has
    the same environment fingerprint as this run's. None when there is none (or no fingerprint)."""
    prints = {n.host: n.fingerprint for n in nodes}
    runs_dir = record.path.parent
    if not prints or not all(prints.values()) or not runs_dir.is_dir():
        return None
    for earlier in sorted((p for p in runs_dir.iterdir() if p.is_dir() and not p.is_symlink()
                           and p.name < record.path.name), reverse=True):
        try:
            there = RunRecord.load(earlier)
            if there.run.status != "ok" or there.run.ansible:
                continue
            theirs = {host: there.node(host) for host in prints}
            if any(n is None or n.observed is None or node_fingerprint(n.observed, there.lock_digest) != prints[h]
                   for h, n in theirs.items()):
                continue
            if any(n is not None and n.result is not None and n.result.changed for n in theirs.values()):
                r = there.run
                return ProvisionedRun(run_id=r.run_id, started=r.started, finished=r.finished, argv=r.argv,
                                      smoke_skipped=r.smoke_skipped)
        except (InputError, OSError):
            continue
    return None


def launch_job(launch: LaunchRecord | None) -> LaunchJob | None:
    """The scheduler job of launch.json (``envbuild.launch.submit``), None without one."""
    if launch is None:
        return None
    job = launch.job

    def text(v: str | None) -> str | None:
        return v or None

    return LaunchJob(scheduler=launch.scheduler, job_id=text(job.job_id), state=text(job.state),
                     exit_code=text(job.exit_code), reason=text(job.reason), node=text(launch.node),
                     passed=launch.passed, replaced=text(launch.replaced),
                     provisioned_run=text(launch.provisioned_run), output_tail=job.tail)


def verdict(reasons: list[Reason], notes: list[str]) -> Verdict:
    """FAIL with any reason; else NOT JUDGED with any note; else PASS (one rule, for every view)."""
    if reasons:
        return Verdict(status="FAIL", reasons=reasons, not_judged=notes)
    return Verdict(status="NOT JUDGED" if notes else "PASS", not_judged=notes)


def prebuilt_use(bundle: BundleRecord, nodes: list[NodeRecord]) -> dict[str, list[str]]:
    """The bundle's carried extension wheels and build-output archives the run used (``prebuilt``:
    a node's step that builds that key ran in this run, the controller's cache held exactly the
    carried bytes, which the provision pushed, and, for build outputs, the node's log shows the
    build after the restore changed none of them) and the others, each with why not
    (``prebuilt_not_used``)."""
    carried = sorted({*bundle.prebuilt, *bundle.prebuilt_seeded})
    planned, ran, trees, kept = set(), set(), set(), set()
    for node in nodes:
        steps = node.plan.cached_builds() if node.plan is not None else []
        changed = set(node.result.changed) if node.result is not None else set()
        planned |= {s.params.cache_key for s in steps}
        ran |= {s.params.cache_key for s in steps if s.id in changed}
        trees |= {s.params.cache_key for s in steps if getattr(s.params, "outputs", None)}
        kept |= treecache.kept_restores(node.log_lines)
    used, unused = [], []
    for key in carried:
        if key not in planned:
            unused.append(f"{key} (no node's plan builds that key)")
        elif key not in ran:
            unused.append(f"{key} (no node's step of that key ran in this run: its environment had it already)")
        elif key in trees and key not in kept:
            unused.append(f"{key} (its build outputs were restored, but the node's log does not show the build "
                          "then changed none of them: it redid them, in part or whole)")
        elif key in bundle.prebuilt_not_used:
            unused.append(f"{key} (the controller's build cache held another wheel or archive for that key: "
                          "that one was used)")
        else:
            used.append(key)
    return {"prebuilt": used, "prebuilt_not_used": unused}


def collect(run_dir: str | Path) -> Report:
    """Read one run directory and produce its report with its verdict (PASS / NOT JUDGED / FAIL)."""
    record = RunRecord.load(run_dir)
    run = record.run
    recipe = record.recipe or RecipeView()
    lock_digest = record.lock_digest if record.lock is not None else run.lock_digest
    reasons: list[Reason] = []
    if run.status != "ok":
        reasons.append(Reason(kind="run", message=f"run status is {run.status!r}, not 'ok'"))
    nodes = []
    for node_rec in record.nodes():
        node, why = node_report(record, node_rec, lock_digest, recipe)
        nodes.append(node)
        reasons += why
    if not nodes:
        reasons.append(Reason(kind="run", message="no node results in the run directory"))
    launch = launch_job(record.launch)  # its failures are the run's and its node's
    bundle = run.bundle

    smoke_skipped = run.smoke_skipped  # provision --no-smoke
    report = Report(
        envbuild_version=__version__,
        verdict=verdict(reasons, not_judged(nodes, recipe, launch, smoke_skipped)),
        fingerprint=run_fingerprint([n.fingerprint for n in nodes], lock_digest),
        run=RunInfo(run_id=run.run_id, recipe=run.recipe, target=run.target, status=run.status,
                    started=run.started, finished=run.finished, argv=run.argv, hosts=run.hosts,
                    envbuild_version=run.envbuild_version, nothing_to_do=run.ansible,
                    provisioned_by=provisioning_run(record, nodes) if run.ansible else None,
                    smoke_skipped=smoke_skipped,
                    bundle=BundleInfo(digest=bundle.digest, file=bundle.file, bytes=bundle.bytes,
                                      offline=bundle.offline,
                                      **prebuilt_use(bundle, record.nodes()))
                    if bundle is not None else None),
        recipe=RecipeInfo(name=recipe.name or run.recipe, title=recipe.title,
                          published=recipe.published.url if recipe.published else None, python=recipe.python,
                          lock_digest=lock_digest),
        deviations=[Deviation(id=d.id, published=d.published, problem=d.problem, instead=d.instead,
                              source=d.source.url if d.source else None, status=d.state,
                              handled_by=d.handled_by)
                    for d in recipe.deviations],
        nodes=nodes,
        launch=launch,
    )
    report.badges, report.repeatability = assess(report), repeatability(report)
    # one verdict beside the badges: a PASS needs every Functional criterion met
    unmet = [f"{b.name}: {c.requirement}: not met ({c.evidence})" for b in report.badges
             if b.id in PASS_NEEDS for c in b.criteria if not c.met and c.id != "functional"]
    if report.verdict.status == "PASS" and unmet:
        report.verdict = verdict(reasons, unmet)
    return report
