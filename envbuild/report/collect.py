"""collect(run_dir) -> Report: read a run directory and judge it.

Reads run.json, recipe.json, lock.lock, launch.json (a run of ``envbuild launch --submit``)
and nodes/<host>/{facts,preflight,plan,result,observed,smoke}.json (any of the node files may
be absent: a refused node has no observed state). Only reads; never touches a node. The
report's ACM badges are judged from the finished report (``envbuild.report.badges``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from envbuild import __version__
from envbuild.errors import InputError
from envbuild.lock.serialize import lock_digest, parse_lock
from envbuild.observe import Observed, compare_expected, expected_state, read_lock
from envbuild.observe.compare import same_version
from envbuild.plan.model import Plan
from envbuild.report import bench
from envbuild.report.fingerprint import node_fingerprint, node_kind, run_fingerprint
from envbuild.recipes.schema import deviation_state
from envbuild.report.badges import assess
from envbuild.report.model import (DecisionRow, Deviation, FactsSummary, LaunchJob, NodeReport, PatchRow,
                                   PinRow, Preflight, Reason, RecipeInfo, Report, RunInfo, StepResult,
                                   Verdict, BundleInfo)
from envbuild.userfile import read_json

OK_VERDICTS = {"ok", "feasible", "pass", "passed", "warn", "warning"}
PASS_NEEDS = ("functional", "reproduced")  # the badges a PASS must stand beside


DAMAGED = "the run directory is damaged; rerun `envbuild provision`"


def load_json(path: Path) -> Any:
    """A JSON file of the run dir, or None when absent; a damaged one is an InputError."""
    if not path.exists():
        return None
    return read_json(path, "run directory JSON file", hint=DAMAGED)


class RunFile(BaseModel):
    """What the report reads from run.json (``envbuild.rundir`` writes more; extra keys pass)."""

    model_config = ConfigDict(defer_build=True, extra="allow")

    schema_: str | None = Field(None, alias="schema")
    run_id: str
    recipe: str
    target: str
    status: str
    started: str | None = None
    finished: str | None = None
    argv: list[str] | None = None
    hosts: list[str] | None = None
    lock_digest: str | None = None
    envbuild_version: str | None = None


def _bundle_info(data: Any):
    """run.json's ``bundle`` (``envbuild.bundle.offline.record``) as the report shows it."""
    if not isinstance(data, dict) or not data.get("digest"):
        return None
    return BundleInfo(digest=str(data["digest"]), file=str(data.get("file") or ""),
                      bytes=data.get("bytes") if isinstance(data.get("bytes"), int) else None,
                      offline=bool(data.get("offline", True)))


def read_run(run_dir: Path) -> dict:
    """run.json of ``run_dir`` as a dict, checked against ``RunFile``; InputError naming the file."""
    path = run_dir / "run.json"
    run = load_json(path)
    if run is None:
        raise InputError(f"{run_dir} is not a run directory (no run.json)",
                         hint="pass a folder under $ENVBUILD_HOME/runs/, made by `envbuild provision`")
    if not isinstance(run, dict):
        raise InputError(f"{path}: not a run record: a JSON {type(run).__name__}, expected an object",
                         hint=DAMAGED)
    try:
        RunFile.model_validate(run)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc']) or '<top>'}: {e['msg']}" for e in exc.errors()]
        raise InputError(f"{path}: not a run record: {'; '.join(problems[:4])}"
                         + (f" (and {len(problems) - 4} more)" if len(problems) > 4 else ""),
                         hint=DAMAGED) from None
    return run


def facts_summary(f: dict) -> FactsSummary:
    gpus = f.get("gpus") or []
    names = sorted({g.get("name") for g in gpus if g.get("name")})
    mem = f.get("memory_gib")
    os_name = f.get("os_pretty") or " ".join(x for x in (f.get("os_id"), f.get("os_version")) if x) or None
    return FactsSummary(gpu=", ".join(names) or None, gpu_count=len(gpus),
                        compute_capability=", ".join(sorted({g.get("compute_capability", "") for g in gpus})) or None,
                        driver=f.get("driver_version"), driver_cuda=f.get("driver_cuda"), nvcc=f.get("nvcc"),
                        nccl=f.get("nccl_version"), os=os_name, glibc=f.get("glibc"), cpu=f.get("cpu_model"),
                        memory_gib=round(mem, 1) if isinstance(mem, (int, float)) else None, origin=f.get("origin"))


def preflight_summary(p: dict) -> Preflight:
    """Tolerant reader of the compat checker's verdict JSON."""
    verdict = p.get("verdict") or p.get("status")
    if verdict is None and "feasible" in p:
        verdict = "feasible" if p["feasible"] else "infeasible"
    verdict = str(verdict or "unknown")
    ok = p["feasible"] if isinstance(p.get("feasible"), bool) else verdict.lower() in OK_VERDICTS
    problems = []
    for key in ("violations", "refusals", "findings", "problems", "errors"):
        for item in p.get(key) or []:
            if isinstance(item, dict):
                sev = item.get("severity") or item.get("level")
                if sev and str(sev).lower() in ("info", "ok", "pass"):
                    continue
                text = item.get("message") or item.get("what") or item.get("summary") or item.get("id")
                fix = item.get("fix")
                label = "warning: " if str(sev).lower() == "warning" else ""
                problems.append(f"{label}{text}" + (f" (fix: {fix})" if fix else ""))
            else:
                problems.append(str(item))
    return Preflight(verdict=verdict, ok=ok, problems=problems)


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


def unverified_packages(plan: dict) -> list[str]:
    """Packages the plan installs without a hash (each allowed by --allow-unverified)."""
    steps = Plan.model_validate(plan).steps if plan else []
    return sorted({n for s in steps if s.kind in ("pip_install", "pip_tooling") for n in s.params.unverified})


def patch_rows(exp, obs: Observed | None, plan: dict) -> list[PatchRow]:
    decided = {}
    for step in (Plan.model_validate(plan).steps if plan else []):
        p = step.params
        if p.kind == "patch":
            decided[p.id] = ("expect" if p.patch_kind == "expect" else (p.decision or "patched"),
                             step.reason)
    recorded = {p.id: p for p in (obs.patches if obs else [])}
    rows = []
    for pid in sorted(set(decided) | set(recorded) | set(exp.patches)):
        rec = recorded.get(pid)
        outcome, why = decided.get(pid, (None, ""))
        rows.append(PatchRow(id=pid, component=(rec.component if rec else None) or exp.patches.get(pid) or None,
                             decision=outcome, status=rec.status if rec else "not recorded",
                             reason=(rec.reason if rec and rec.reason else why), diff=rec.diff if rec else ""))
    return rows


def _plan_versions(plan: dict) -> tuple[str | None, str | None]:
    """(python, torch) versions a node's plan installs."""
    python = torch = None
    for step in plan.get("steps", []):
        p = step.get("params") or {}
        if p.get("kind") == "environment":
            python = p.get("python")
        for r in p.get("requirements") or []:
            if str(r.get("name", "")).lower() == "torch":
                torch = r.get("version")
    return python, torch


def node_report(node_dir: Path, lock: dict | None, lock_digest: str | None, recipe: dict) -> tuple[NodeReport, list[Reason]]:
    host = node_dir.name
    reasons: list[Reason] = []
    facts, pre, plan = (load_json(node_dir / n) for n in ("facts.json", "preflight.json", "plan.json"))
    result, observed, smoke = (load_json(node_dir / n) for n in ("result.json", "observed.json", "smoke.json"))
    node = NodeReport(host=host, facts=facts_summary(facts) if facts else None)
    if pre:
        node.preflight = preflight_summary(pre)
        if not node.preflight.ok:
            detail = "; ".join(node.preflight.problems) or node.preflight.verdict
            reasons.append(Reason(kind="preflight", host=host, message=f"preflight refused the node: {detail}"))
    if result:
        node.result = StepResult.model_validate({k: result.get(k) for k in StepResult.model_fields if result.get(k) is not None})
        if node.result.status != "ok":
            where = f" at step {node.result.failed_step}" if node.result.failed_step else ""
            reasons.append(Reason(kind="step", host=host, message=f"provision {node.result.status}{where}"
                                  + (f" (rc {node.result.rc})" if node.result.rc is not None else "")))
    plan = plan or {}
    node.kind = node_kind(facts, *_plan_versions(plan))
    node.decisions = [DecisionRow.model_validate(d) for d in plan.get("decisions", [])]
    node.insecure = bool(result and result.get("insecure"))
    node.unverified = unverified_packages(plan)
    exp = expected_state(lock, plan or None)
    obs = Observed.model_validate(observed) if observed else None
    if obs is not None:
        node.observed, node.python = True, obs.python
        node.pins = pins(exp, obs)
        node.drift = [d.model_copy(update={"host": host}) for d in compare_expected(exp, obs)]
        node.fingerprint = node_fingerprint(obs, lock_digest)
        reasons += [Reason(kind="drift", host=host, message=d.line()) for d in node.drift]
    elif not node.result or node.result.status == "ok":
        reasons.append(Reason(kind="unobserved", host=host, message="no observed.json: installed state not verified"))
    node.patches = patch_rows(exp, obs, plan)
    if not smoke and node.fingerprint and node.result is not None and node.result.status == "ok" \
            and not (result or {}).get("changed"):
        smoke, node.evidence_from = carried_smoke(node_dir, node.fingerprint)
    if smoke:
        node.benchmarks = bench.benchmarks(smoke, recipe.get("benchmark"),
                                           node.facts.gpu if node.facts is not None else None)
        node.smoke_ok = bench.section_ok(smoke)
        native = smoke.get("native") if isinstance(smoke.get("native"), dict) else {}
        if native.get("ran") is False:
            node.benchmark_not_run = str(native.get("reason") or "not run")
        judged = bench.stored_verdict(native) if native.get("ran") is not False else None
        done = judged.completion if judged is not None else None
        before = len(reasons)
        if isinstance(done, dict) and done.get("state") not in (None, "complete"):
            reasons.append(Reason(kind="benchmark", host=host, message=f"the benchmark run did not complete "
                                  f"({done.get('state')}: {done.get('detail')})"))
        for b in node.benchmarks:
            if b.passed is False and b.threshold is not None:
                cmp = "below" if b.higher_is_better else "above"
                got = f"{b.name} = {b.value:g} {b.unit}".rstrip() if b.value is not None else f"{b.name} missing"
                reasons.append(Reason(kind="benchmark", host=host, message=f"{got}, {cmp} threshold {b.threshold:g}"
                                      if b.value is not None else f"{got} (threshold {b.threshold:g})"))
        if judged is not None and judged.passed is False and len(reasons) == before:  # e.g. its metric not in the output
            reasons.append(Reason(kind="benchmark", host=host, message=judged.reason or "benchmark failed"))
        reasons += [Reason(kind="smoke", host=host, message=f"smoke {k} not ok") for k, ok in node.smoke_ok.items() if not ok]
    return node, reasons


def not_judged(nodes: list[NodeReport], recipe: dict, launch: LaunchJob | None) -> list[str]:
    """What keeps a run with no failure from a PASS: each node's benchmark that did not run,
    ran without a threshold, or was not compared; [] when every node's was judged."""
    bench_spec = recipe.get("benchmark") if isinstance(recipe.get("benchmark"), dict) else None
    if not bench_spec:
        return ["the recipe declares no benchmark: nothing was measured against a threshold"]
    out = []
    for n in nodes:
        rows = [b for b in n.benchmarks if b.name.startswith("native.")]
        if not rows:
            why = n.benchmark_not_run or ("no smoke ran" if not n.smoke_ok else "no result in smoke.json")
            out.append(f"{n.host}: the recipe's benchmark did not run ({why})")
        for b in rows:
            if b.passed is None:  # the judge's NOT JUDGED, with its reason
                got = f"{b.name} = {b.value:.4g} {b.unit}".rstrip() if b.value is not None else b.name
                out.append(f"{n.host}: {got} recorded, not judged: " + (b.reason.split("not judged: ", 1)[-1]
                                                                          or "the recipe sets no threshold"))
    if launch is not None and launch.passed is None:
        out.append(f"{launch.scheduler} job {launch.job_id or '?'}: {launch.replaced or 'no figure judged'}")
    return out


def run_lock_digest(lock_file: Path) -> str | None:
    """The lock's identifier (``envbuild.lock.lock_digest``) for a run whose run.json predates
    recording it; None when the file is not a lock envbuild reads."""
    try:
        return lock_digest(parse_lock(lock_file.read_text(), lock_file))
    except (InputError, OSError, ValueError):
        return None


def carried_smoke(node_dir: Path, fingerprint: str) -> tuple[dict | None, str | None]:
    """(smoke.json, run id) of the newest earlier run in the same runs folder whose node of the
    same name has the same environment fingerprint and a smoke.json: what still holds for an
    environment a run found with nothing to do. (None, None) when there is none."""
    run_dir, host = node_dir.parent.parent, node_dir.name
    runs = sorted((p for p in run_dir.parent.iterdir() if p.is_dir() and not p.is_symlink()
                   and p.name < run_dir.name), reverse=True) if run_dir.parent.is_dir() else []
    for earlier in runs:
        there = earlier / "nodes" / host
        try:
            smoke, observed = load_json(there / "smoke.json"), load_json(there / "observed.json")
            if not smoke or not observed:
                continue
            lock_file = earlier / "lock.lock"
            digest = read_run(earlier).get("lock_digest") or (
                run_lock_digest(lock_file) if lock_file.exists() else None)
            if node_fingerprint(Observed.model_validate(observed), digest) == fingerprint:
                return smoke, earlier.name
        except (InputError, ValidationError, OSError):
            continue
    return None, None


def launch_job(launch: Any) -> LaunchJob | None:
    """The scheduler job of launch.json (``envbuild.launch.submit``), None without one."""
    if not isinstance(launch, dict):
        return None
    job = launch.get("job") if isinstance(launch.get("job"), dict) else {}

    def text(v: Any) -> str | None:
        return None if v is None or v == "" else str(v)

    passed = launch.get("passed")
    return LaunchJob(scheduler=str(launch.get("scheduler") or job.get("scheduler") or "?"),
                     job_id=text(job.get("job_id")), state=text(job.get("state")),
                     exit_code=text(job.get("exit_code")), reason=text(job.get("reason")),
                     node=text(launch.get("node")), passed=passed if isinstance(passed, bool) else None,
                     replaced=text(launch.get("replaced")), provisioned_run=text(launch.get("provisioned_run")),
                     output_tail=str(job.get("tail") or ""))


def verdict(reasons: list[Reason], notes: list[str]) -> Verdict:
    """FAIL with any reason; else NOT JUDGED with any note; else PASS (one rule, for every view)."""
    if reasons:
        return Verdict(status="FAIL", reasons=reasons, not_judged=notes)
    return Verdict(status="NOT JUDGED" if notes else "PASS", not_judged=notes)


def collect(run_dir: str | Path) -> Report:
    """Read one run directory and produce its report with its verdict (PASS / NOT JUDGED / FAIL)."""
    run_dir = Path(run_dir)
    run = read_run(run_dir)
    recipe = load_json(run_dir / "recipe.json") or {}
    lock_file = run_dir / "lock.lock"
    lock = read_lock(lock_file) if lock_file.exists() else None
    lock_digest = run.get("lock_digest") or (run_lock_digest(lock_file) if lock else None)
    reasons: list[Reason] = []
    if run.get("status") != "ok":
        reasons.append(Reason(kind="run", message=f"run status is {run.get('status')!r}, not 'ok'"))
    nodes = []
    node_root = run_dir / "nodes"
    for node_dir in sorted(p for p in node_root.iterdir() if p.is_dir()) if node_root.is_dir() else []:
        node, why = node_report(node_dir, lock, lock_digest, recipe)
        nodes.append(node)
        reasons += why
    if not nodes:
        reasons.append(Reason(kind="run", message="no node results in the run directory"))
    launch = launch_job(load_json(run_dir / "launch.json"))  # its failures are the run's and its node's
    published = recipe.get("published") or {}

    report = Report(
        envbuild_version=__version__,
        verdict=verdict(reasons, not_judged(nodes, recipe, launch)),
        fingerprint=run_fingerprint([n.fingerprint for n in nodes], lock_digest),
        run=RunInfo(run_id=run.get("run_id", run_dir.name), recipe=run.get("recipe", recipe.get("name", "?")),
                    target=run.get("target", "?"), status=run.get("status", "?"), started=run.get("started"),
                    finished=run.get("finished"), argv=run.get("argv") or [], hosts=run.get("hosts") or [],
                    envbuild_version=run.get("envbuild_version"), bundle=_bundle_info(run.get("bundle"))),
        recipe=RecipeInfo(name=recipe.get("name", run.get("recipe", "?")), title=recipe.get("title", ""),
                          published=published.get("url"), python=recipe.get("python"), lock_digest=lock_digest),
        deviations=[Deviation(id=d["id"], published=d["published"], problem=d["problem"], instead=d["instead"],
                              source=(d.get("source") or {}).get("url"), status=deviation_state(d),
                              handled_by=list(d.get("handled_by") or []))
                    for d in recipe.get("deviations", [])],
        nodes=nodes,
        launch=launch,
    )
    report.badges = assess(report)
    # one verdict beside the badges: a PASS needs every Functional and Reproduced criterion met
    unmet = [f"{b.name}: {c.requirement}: not met ({c.evidence})" for b in report.badges
             if b.id in PASS_NEEDS for c in b.criteria if not c.met and c.id != "functional"]
    if report.verdict.status == "PASS" and unmet:
        report.verdict = verdict(reasons, unmet)
    return report
