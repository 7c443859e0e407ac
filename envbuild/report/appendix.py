"""The artifact appendix of a run (``envbuild report --appendix``, issue 39): what an
artifact-evaluation reviewer is asked for, each item with the run's evidence or a stated gap.

``build(report, recipe, lock) -> Appendix`` is pure: the judged report (``collect`` of a run
folder, or a committed result judged again: ``envbuild.report.rejudge.as_report``), the recipe
and the lock the run used. It holds the dependencies as a hashed list, the container and the
command that builds it, one command per experiment with the expected resource use beside what the
run measured, and the checklist (``CHECKLIST``: the items the systems venues' artifact guides
ask of an appendix) mapped item by item to evidence. ``to_markdown`` and ``to_html`` render it.
"""

from __future__ import annotations

import shlex
from datetime import datetime
from html import escape

from pydantic import BaseModel, ConfigDict, Field

from envbuild.lock.schema import Lock
from envbuild.recipes.schema import Recipe, Resources
from envbuild.report.model import Report

GUIDE = "https://sysartifacts.github.io/eurosys2026/packaging"  # the appendix's content
# (id, what the item asks, where it is asked): EuroSys's packaging guide (the appendix: hardware,
# software and configuration requirements, the major claims, time and storage, how to compare
# results) and the EuroSys 2027 checklist items issue 39 quotes
CHECKLIST = (
    ("available", "the artifact and its sources at a permanent, named location", "ACM Artifacts Available"),
    ("hardware", "the hardware the experiments need", GUIDE),
    ("software", "the software dependencies, as a list a package manager installs", GUIDE),
    ("container", "a container (or image) and the command that builds it", GUIDE),
    ("commands", "a single command to run each experiment", "EuroSys 2027 checklist"),
    ("resources", "the expected resource use per kind of experiment (time, storage, memory)",
     "EuroSys 2027 checklist"),
    ("claims", "the main results and how to compare a reproduced run with them", GUIDE),
    ("validation", "evidence that the artifact ran and was checked", "ACM Artifacts Evaluated - Functional"),
    ("active-time", "a few minutes of active (hands-on) reviewer time", "EuroSys 2027 checklist"),
)


class _M(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Item(_M):
    id: str
    asks: str
    source: str
    evidence: str | None = None
    gap: str | None = None


class Experiment(_M):
    kind: str  # provision | smoke | benchmark
    command: str
    expected: Resources | None = None
    measured: str | None = None  # what the run shows of its use
    check: str | None = None  # measured against expected


class Appendix(_M):
    recipe: str
    target: str
    run: str
    verdict: str
    published: str | None = None
    lock_digest: str | None = None
    dependencies: list[str] = Field(default_factory=list)  # name==version --hash=sha256:...
    unhashed: list[str] = Field(default_factory=list)  # locked without a file hash (and why)
    container: list[str] = Field(default_factory=list)  # the commands that render and build it
    experiments: list[Experiment] = Field(default_factory=list)
    checklist: list[Item] = Field(default_factory=list)


def _minutes(started: str | None, finished: str | None) -> float | None:
    try:
        a, b = (datetime.strptime(t, "%Y-%m-%dT%H:%M:%S%z") for t in (started, finished))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return (b - a).total_seconds() / 60


def _dependencies(lock: Lock | None) -> tuple[list[str], list[str]]:
    if lock is None:
        return [], []
    from envbuild.errors import InputError
    from envbuild.lock.export import requirement_lines

    unhashed = [f"{p.name} {p.version}: {p.reason or p.provided_by or 'no file hash'}" for p in lock.packages
                if not (p.verified and p.dist is not None and p.dist.sha256)]
    try:
        return requirement_lines(lock), unhashed
    except InputError as exc:  # a lock from before upstream URLs were recorded
        return [], unhashed + [exc.message]


def _provision(report: Report, expected: Resources | None) -> tuple[str | None, str | None]:
    """(measured, check) of the provision: this run's minutes against the expected ones; for a
    no-op (nothing to do) the minutes of the run that provisioned, never the no-op's own."""
    run = report.run
    took = _minutes(run.started, run.finished)
    smoke = "smoke not run (--no-smoke)" if run.smoke_skipped else "smoke included"
    if run.nothing_to_do is None:
        measured = f"{took:.1f} min from facts to report (run.json), {smoke}" if took is not None else None
        return measured, _against(took, expected)
    noop = (f"this run provisioned nothing ({run.nothing_to_do})"
            + (f"; it took {took * 60:.0f} s to find that" if took is not None else ""))
    prov = run.provisioned_by
    if prov is None:
        return (noop + "; the run that provisioned this environment is not in this runs folder, so its time "
                "is not known here", "not compared: a no-op's minutes are not a provision's")
    p_took = _minutes(prov.started, prov.finished)
    p_smoke = "smoke not run (--no-smoke)" if prov.smoke_skipped else "smoke included"
    if p_took is None:
        return (noop + f"; provisioned by run `{prov.run_id}`, which recorded no start and finish",
                "not compared: the provisioning run's minutes are not recorded")
    check = _against(p_took, expected)
    return (noop + f"; provisioned by run `{prov.run_id}`: {p_took:.1f} min from facts to report, {p_smoke}",
            f"run `{prov.run_id}`: {check}" if check else None)


def _against(took: float | None, expected: Resources | None) -> str | None:
    if expected is None or took is None:
        return None
    return (f"within the expected {expected.minutes:g} min" if took <= expected.minutes
            else f"{took / expected.minutes:.1f}x the expected {expected.minutes:g} min")


def _smoke_measured(report: Report) -> str | None:
    carried = sorted({n.evidence_from for n in report.nodes if n.evidence_from})
    if report.run.nothing_to_do is not None:
        return "not run by this no-op" + (f"; its smoke and benchmark carried forward from run(s) "
                                          f"{', '.join(carried)}" if carried else "")
    if report.run.smoke_skipped:
        return "not run (provision --no-smoke)"
    return "part of the provision above" if _minutes(report.run.started, report.run.finished) is not None else None


def _experiments(report: Report, recipe: Recipe) -> list[Experiment]:
    argv = " ".join(shlex.quote(a) for a in report.run.argv) or f"envbuild provision {recipe.name} --target " \
                                                                  f"{report.run.target}"
    expected = {r.experiment: r for r in recipe.resources}
    native = [b for n in report.nodes for b in n.benchmarks if b.name.startswith("native.")]
    gpus = max((n.facts.gpu_count for n in report.nodes if n.facts), default=0)
    prov = expected.get("provision")
    measured, check = _provision(report, prov)
    out = [Experiment(kind="provision", command=argv, expected=prov, measured=measured, check=check)]
    if "smoke" in expected:
        out.append(Experiment(kind="smoke", command="part of the provision (again: envbuild smoke --local)",
                              expected=expected["smoke"], measured=_smoke_measured(report)))
    if recipe.benchmark is not None:
        bench = expected.get("benchmark")
        shown = "; ".join(f"{b.name} = {b.value:g} {b.unit}".strip() + f" ({b.verdict})" for b in native
                          if b.value is not None)
        carried = sorted({n.evidence_from for n in report.nodes if n.evidence_from and n.benchmarks})
        if shown and carried:
            shown += f" (carried forward from run(s) {', '.join(carried)})"
        check = None
        if bench and gpus:
            check = (f"the node had {gpus} GPU(s), {bench.gpus} expected" if gpus >= bench.gpus
                     else f"the node had {gpus} GPU(s), fewer than the {bench.gpus} expected")
        not_run = ("the benchmark did not run in this run (provision --no-smoke)" if report.run.smoke_skipped
                   else "the benchmark did not run in this run")
        out.append(Experiment(kind="benchmark", command=recipe.benchmark.command, expected=bench,
                              measured=shown or not_run, check=check))
    return out


def _item(row: tuple[str, str, str], evidence: str | None, gap: str | None) -> Item:
    return Item(id=row[0], asks=row[1], source=row[2], evidence=evidence or None, gap=gap or None)


def build(report: Report, recipe: Recipe, lock: Lock | None) -> Appendix:
    """The appendix of ``report`` (module docstring)."""
    hashed, unhashed = _dependencies(lock)
    experiments = _experiments(report, recipe)
    target = report.run.target
    container = [f"envbuild render {recipe.name} --target {target} --format dockerfile -o image",
                 f"podman build -t envbuild-{recipe.name}:{target} image"]
    rows = dict((r[0], r) for r in CHECKLIST)
    badges = {b.id: b for b in report.badges}
    avail = badges.get("available")
    pinned = sum(1 for s in recipe.sources if s.sha)
    facts = [n.facts for n in report.nodes if n.facts]
    hw = "; ".join(f"{f.gpu_count} x {f.gpu}" if f.gpu else f"no GPU ({f.cpu or 'CPU'}, "
                   f"{f.memory_gib or '?'} GiB)" for f in facts)
    bench = recipe.benchmark
    native = [b for n in report.nodes for b in n.benchmarks if b.name.startswith("native.")]
    claims = None
    if bench is not None:
        pub = f"published {bench.published.value:g} {bench.unit} ({bench.published.source})" if bench.published \
            else "no published figure"
        judged = "; ".join(f"{b.verdict}: {b.reason}" for b in native if b.verdict) or None
        claims = f"{bench.metric} by the {bench.parser} parser; {pub}" + (f"; this run: {judged}" if judged else "")
        repro = badges.get("reproduced")
        if repro is not None:  # the published result, apart from how the setup repeats here
            claims += "; Results Reproduced: " + (
                f"not applicable ({repro.not_applicable})" if repro.not_applicable else "supported" if repro.supported
                else "not supported (" + ", ".join(c.id for c in repro.criteria if not c.met) + ")")
        claims += "".join(f"; {line}" for line in report.repeatability)
    waits = sum(r.minutes for r in recipe.resources)
    observed = any(n.observed for n in report.nodes)
    items = [
        _item(rows["available"], f"{recipe.published.url}; {pinned} source(s) pinned by commit; lock "
                                 f"{(report.recipe.lock_digest or 'none')[:16]}",
              (avail.not_applicable or ("; ".join(c.evidence for c in avail.criteria if not c.met)
                                        if not avail.supported else "")) if avail else "no badge judged"),
        _item(rows["hardware"], f"this run: {hw}" if hw else None,
              "" if hw else "the run recorded no facts"),
        _item(rows["software"], f"{len(hashed)} package(s) with their sha256 (below)" if hashed else None,
              ("; ".join(unhashed) if unhashed else "") if lock else "the run's lock is not at hand"),
        _item(rows["container"], " && ".join(container), ""),
        _item(rows["commands"], "; ".join(f"{e.kind}: {e.command}" for e in experiments), ""),
        _item(rows["resources"], "; ".join(f"{r.experiment}: {r.gpus} GPU(s), {r.host_memory_gib:g} GiB host "
                                           f"memory, {r.disk_gib:g} GiB disk, about {r.minutes:g} min ({r.basis})"
                                           for r in recipe.resources) or None,
              "" if recipe.resources else f"recipe {recipe.name} states no expected resource use"),
        _item(rows["claims"], claims, "" if bench else f"recipe {recipe.name} has no benchmark"),
        _item(rows["validation"], f"verdict {report.verdict.status}" + (
            "; " + "; ".join(r.message for r in report.verdict.reasons[:3]) if report.verdict.reasons else "")
            + ("" if observed else " (the benchmark only: the environment's observed state is not in this folder)"),
            "; ".join(x for x in ("" if report.verdict.status == "PASS" else "the run's verdict is not PASS",
                                  "" if observed else "no observed pins to show the environment was checked") if x)),
        _item(rows["active-time"], f"{sum(e.kind != 'smoke' for e in experiments)} command(s) to type, then "
                                   f"about {waits:g} min of waiting "
                                   "(the recipe's expected minutes)" if recipe.resources else None,
              "" if recipe.resources else "no expected time stated"),
    ]
    return Appendix(recipe=recipe.name, target=target, run=report.run.run_id, verdict=report.verdict.status,
                    published=recipe.published.url, lock_digest=report.recipe.lock_digest,
                    dependencies=hashed, unhashed=unhashed, container=container, experiments=experiments,
                    checklist=items)


def _res(r: Resources | None) -> str:
    if r is None:
        return "not stated"
    gpu = f" x {r.gpu_memory_gib:g} GiB" if r.gpu_memory_gib else ""
    return (f"{r.gpus} GPU(s){gpu}, {r.host_memory_gib:g} GiB host memory, {r.disk_gib:g} GiB disk, "
            f"about {r.minutes:g} min, network: {r.network} ({r.basis}: {r.source})")


def _cell(text: str | None) -> str:
    return (text or "-").replace("|", "\\|").replace("\n", " ")


def to_markdown(a: Appendix) -> str:
    lines = [f"# Artifact appendix: {a.recipe} on {a.target}", "",
             f"Run `{a.run}`, verdict **{a.verdict}**; published: {a.published or '-'}; lock "
             f"`{a.lock_digest or 'none'}`.", "", "## Checklist", "",
             "| item | asked for | evidence | gap |", "|---|---|---|---|"]
    for i in a.checklist:
        lines.append(f"| {i.id} | {_cell(i.asks)} ({_cell(i.source)}) | {_cell(i.evidence)} | {_cell(i.gap)} |")
    lines += ["", "## Experiments", "", "| experiment | command | expected use | measured | check |",
              "|---|---|---|---|---|"]
    for e in a.experiments:
        lines.append(f"| {e.kind} | `{_cell(e.command)}` | {_cell(_res(e.expected))} | {_cell(e.measured)} | "
                     f"{_cell(e.check)} |")
    lines += ["", "## Container", "", "```bash", *a.container, "```", "", "## Dependencies (hashed)", "",
              "As `envbuild lock RECIPE --target TARGET --format requirements` writes them, for "
              "`pip install --require-hashes --no-deps -r FILE`:", "", "```text",
              *(a.dependencies or ["# none hashed in the lock"]), "```"]
    if a.unhashed:
        lines += ["", "Without a file hash in the lock:", "", *[f"- {u}" for u in a.unhashed]]
    return "\n".join(lines) + "\n"


def to_html(a: Appendix) -> str:
    def table(head: list[str], rows: list[list[str | None]]) -> str:
        th = "".join(f"<th>{escape(h)}</th>" for h in head)
        body = "".join("<tr>" + "".join(f"<td>{escape(c or '-')}</td>" for c in r) + "</tr>" for r in rows)
        return f"<table><tr>{th}</tr>{body}</table>"

    parts = [f"<h1>Artifact appendix: {escape(a.recipe)} on {escape(a.target)}</h1>",
             f"<p>Run <code>{escape(a.run)}</code>, verdict <strong>{escape(a.verdict)}</strong>; published: "
             f"{escape(a.published or '-')}; lock <code>{escape(a.lock_digest or 'none')}</code>.</p>",
             "<h2>Checklist</h2>",
             table(["item", "asked for", "evidence", "gap"],
                   [[i.id, f"{i.asks} ({i.source})", i.evidence, i.gap] for i in a.checklist]),
             "<h2>Experiments</h2>",
             table(["experiment", "command", "expected use", "measured", "check"],
                   [[e.kind, e.command, _res(e.expected), e.measured, e.check] for e in a.experiments]),
             "<h2>Container</h2>", f"<pre>{escape(chr(10).join(a.container))}</pre>",
             "<h2>Dependencies (hashed)</h2>",
             f"<pre>{escape(chr(10).join(a.dependencies) or '# none hashed in the lock')}</pre>"]
    if a.unhashed:
        parts.append("<ul>" + "".join(f"<li>{escape(u)}</li>" for u in a.unhashed) + "</ul>")
    return ("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Artifact appendix: "
            f"{escape(a.recipe)}</title></head><body>\n" + "\n".join(parts) + "\n</body></html>\n")
