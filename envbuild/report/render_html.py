"""The report as one self-contained HTML file: inline CSS and SVG, no script, no URL to fetch.

Layout for a five-minute review: the verdict banner and its reasons, the ACM badges the run
supports, a run summary (envbuild version, command line, hosts), a per-node overview table, the
benchmark chart and table, the launch job (a run of ``envbuild launch --submit``), then
per-node details collapsed in <details>.
"""

from __future__ import annotations

import shlex
from html import escape

from markupsafe import Markup

from envbuild.render import sitetemplates
from envbuild.report.model import Benchmark, LaunchJob, NodeReport, Report
from envbuild.report.pipeline_svg import pipeline_section
from envbuild.report.plot import bar_chart
from envbuild.report.render_md import (IMPORT_COST_HEAD, PASS_TEXT, bundle_text, fmt_num, import_cost_rows,
                                       published_text, run_notes, short)

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1180px;color:#1d232b;
padding:0 16px}
h1{font-size:22px;margin:0 0 12px}h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #dde1e6;padding-bottom:4px}
.verdict{padding:14px 18px;border-radius:6px;color:#fff;font-size:20px;font-weight:700}
.PASS{background:#2e8540}.FAIL{background:#c62828}.NOT-JUDGED{background:#8a6d00}
.reasons{margin:8px 0 0;padding-left:20px}.reasons li{margin:2px 0}
table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}
th,td{border:1px solid #d4d9df;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f2f4f7}td.bad,span.bad{color:#c62828;font-weight:700}td.good,span.good{color:#2e8540}
code,pre{font:12px/1.35 ui-monospace,Menlo,Consolas,monospace}
pre{background:#f6f8fa;padding:8px;overflow-x:auto;border:1px solid #e1e4e8}
details{border:1px solid #dde1e6;border-radius:5px;padding:6px 10px;margin:8px 0}
summary{cursor:pointer;font-weight:600}
.badges{display:flex;gap:10px;flex-wrap:wrap;margin:10px 0}
.badge{border:2px solid #8a8f98;border-radius:6px;padding:6px 10px;min-width:250px;background:#f6f7f9}
.badge.yes{border-color:#2e8540;background:#eef7f0}.badge b{display:block}
.badge .state{font-size:12px}.yes .state{color:#2e8540}.no .state{color:#6b7280}
.uncompared{color:#444;font-size:13px}
td.cmd{font:12px/1.35 ui-monospace,Menlo,Consolas,monospace;word-break:break-all;max-width:900px}
"""


def version_text(report: Report) -> str:
    """The envbuild that made the run, and the one that wrote the report when it differs."""
    made, wrote = report.run.envbuild_version, report.envbuild_version
    if made is None:
        return f"not recorded by the run (report by {wrote or '?'})"
    return made if wrote in (None, made) else f"{made} (report by {wrote})"


def td(value, cls: str = "") -> str:
    text = "-" if value is None or value == "" else str(value)
    return f'<td class="{cls}">{escape(text)}</td>' if cls else f"<td>{escape(text)}</td>"


def table(headers: list[str], rows: list[str]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def ok_cell(ok: bool | None, yes: str = "ok", no: str = "FAIL") -> str:
    if ok is None:
        return td("-")
    return td(yes, "good") if ok else td(no, "bad")


def overview(report: Report) -> str:
    rows = []
    for n in report.nodes:
        f = n.facts
        gpu = f"{f.gpu_count}x {f.gpu}" if f and f.gpu else "none"
        pins_bad = sum(1 for p in n.pins if not p.ok)
        bench_bad = sum(1 for b in n.benchmarks if b.passed is False)
        rows.append("<tr>" + td(n.host) + td(gpu) + td(f.driver if f else None) + td(f.driver_cuda if f else None)
                    + td(f.nccl if f else None) + td(f.os if f else None)
                    + ok_cell(n.preflight.ok if n.preflight else None, n.preflight.verdict if n.preflight else "",
                              n.preflight.verdict if n.preflight else "")
                    + ok_cell(n.result.status == "ok" if n.result else None, "ok", n.result.status if n.result else "")
                    + (ok_cell(not n.drift, f"{len(n.pins) - pins_bad} ok", f"{len(n.drift)} drift") if n.observed
                       else td("not observed", "bad"))
                    + ok_cell(bench_bad == 0 if n.benchmarks else None, "pass", f"{bench_bad} missed") + "</tr>")
    return table(["node", "GPU", "driver", "CUDA", "NCCL", "OS", "preflight", "provision", "pins", "benchmarks"], rows)


def node_details(n: NodeReport) -> str:
    parts = [f"<details><summary>{escape(n.host)}: details</summary>"]
    if n.preflight and n.preflight.problems:
        parts.append("<p>Preflight problems:</p><ul>" + "".join(f"<li>{escape(p)}</li>" for p in n.preflight.problems) + "</ul>")
    if n.result:
        r = n.result
        parts.append(f"<p>Provision <b>{escape(r.status)}</b>"
                     + (f" at <code>{escape(r.failed_step)}</code> (rc {r.rc})" if r.failed_step else "")
                     + f"; changed {len(r.changed)}, skipped {len(r.skipped)}</p>")
        if r.log_tail and r.status != "ok":
            parts.append(f"<pre>{escape(r.log_tail)}</pre>")
    if n.insecure:
        parts.append('<p class="bad"><b>Host keys were NOT checked</b> for this node (--insecure).</p>')
    if n.unverified:
        parts.append("<p>Installed without a verified hash (--allow-unverified): "
                     + ", ".join(f"<code>{escape(u)}</code>" for u in n.unverified) + "</p>")
    if n.drift:
        parts.append(table(["drift", "subject", "expected", "observed"],
                           ["<tr>" + td(d.kind, "bad") + td(d.subject) + td(short(d.expected)) + td(short(d.observed))
                            + "</tr>" for d in n.drift]))
    if n.pins:
        parts.append(table(["kind", "name", "expected", "observed", ""],
                           ["<tr>" + td(p.kind) + td(p.name) + td(short(p.expected, 16)) + td(short(p.observed, 16))
                            + ok_cell(p.ok, "ok", "DRIFT") + "</tr>" for p in n.pins]))
    if n.patches:
        parts.append(table(["patch", "component", "decision", "status", "why"],
                           ["<tr>" + td(p.id) + td(p.component) + td(p.decision)
                            + td(p.status, "bad" if p.status == "reverted" else "") + td(p.reason) + "</tr>"
                            for p in n.patches]))
        for p in n.patches:
            if p.diff:
                parts.append(f"<details><summary>diff {escape(p.id)}</summary><pre>{escape(p.diff)}</pre></details>")
    if n.decisions:
        parts.append(table(["decision", "outcome", "why"],
                           ["<tr>" + td(d.subject) + td(d.outcome) + td(d.reason) + "</tr>" for d in n.decisions]))
    if n.fingerprint:
        parts.append(f"<p>Node environment fingerprint <code>{n.fingerprint}</code></p>")
    parts.append("</details>")
    return "\n".join(parts)


def badges(report: Report) -> str:
    """The ACM badges: a card per badge, then the table of criteria with their evidence."""
    if not report.badges:
        return ""
    cards, rows = [], []
    for b in report.badges:
        state = (f"not applicable: {b.not_applicable}" if b.not_applicable
                 else "supported by this run" if b.supported else "not supported by this run")
        cards.append(f'<div class="badge {"yes" if b.supported else "no"}" id="badge-{b.id}"><b>{escape(b.name)}</b>'
                     f'<span class="state">{"&#10003; " if b.supported else ""}{escape(state)}</span></div>')
        rows += ["<tr>" + td(b.name) + td(c.requirement) + ok_cell(c.met, "met", "not met") + td(c.evidence) + "</tr>"
                 for c in b.criteria]
    return ('<h2>ACM artifact badges</h2><div class="badges">' + "".join(cards) + "</div>"
            "<details><summary>criteria and evidence</summary>"
            + table(["badge", "criterion", "", "evidence"], rows)
            + "<p>Reviewers award the badges; this says which ones the run's evidence supports.</p></details>"
            + ("<p>Repeatability (envbuild's own runs on the same GPU; not an ACM badge):</p><ul>"
               + "".join(f"<li>{escape(line)}</li>" for line in report.repeatability) + "</ul>"
               if report.repeatability else ""))


def launch_section(job: LaunchJob | None) -> str:
    if job is None:
        return ""
    rows = [("scheduler", job.scheduler), ("job", job.job_id), ("state", job.state), ("exit code", job.exit_code),
            ("reason", job.reason), ("node", job.node), ("training command replaced by", job.replaced),
            ("provisioned run", job.provisioned_run)]
    state_ok = None if job.state is None else job.state == "COMPLETED"
    body = "".join("<tr><th>" + escape(k) + "</th>" + (ok_cell(state_ok, v or "", v or "") if k == "state" else td(v))
                   + "</tr>" for k, v in rows if v is not None or k in ("state", "exit code"))
    tail = f"<p>Output tail:</p><pre>{escape(job.output_tail)}</pre>" if job.output_tail else "<p>No output.</p>"
    return f'<h2>Launch job</h2><table id="launch">{body}</table>{tail}'


def spread_text(b: Benchmark) -> str | None:
    return f"{fmt_num(b.spread.min)} - {fmt_num(b.spread.max)} (n={b.spread.n})" if b.spread else None


def import_costs(report: Report) -> str:
    """Each rank's import of torch (the collective smoke's): where from and what it took."""
    rows = import_cost_rows(report)
    if not rows:
        return ""
    return ('<h2>Import cost</h2><p>Each rank\'s <code>import torch</code> from its environment (the collective '
            "smoke, before it joins the group): seconds, and the files and folders Python opened and listed "
            "(its audit events; shared libraries the loader maps are not counted).</p>"
            + table(IMPORT_COST_HEAD, ["<tr>" + "".join(td(x) for x in r) + "</tr>" for r in rows]))


def pipelines(report: Report) -> str:
    """The pipeline computation order of each node whose benchmark trace has one."""
    blocks = [pipeline_section(n.host, n.pipeline) for n in report.nodes if n.pipeline is not None]
    return ("<h2>Pipeline computation order</h2>" + "".join(blocks)) if blocks else ""


def render_html(report: Report, site: tuple[tuple[str, str], ...] = ()) -> str:
    """One HTML document, openable with no network: envbuild's template
    (``envbuild/render/jinja/report.html.j2``), or the site's over it (``site``); every section
    below is HTML made here with each value escaped, and the template escapes the rest."""
    v, run, rec = report.verdict, report.run, report.recipe
    reasons = "".join(f"<li>{escape(r.kind)}{escape(f' [{r.host}]' if r.host else '')}: {escape(r.message)}</li>"
                      for r in v.reasons)
    reasons += "".join(f"<li>not judged: {escape(note)}</li>" for note in v.not_judged)
    summary = "<table>" + "".join(["<tr><th>" + escape(k) + "</th>" + td(val) + "</tr>" for k, val in [
        ("run", f"{run.run_id} ({run.status})"), ("recipe", f"{rec.name}: {rec.title}"), ("published", rec.published),
        ("lock digest", rec.lock_digest), ("fleet fingerprint (all nodes)", report.fingerprint or "not observed"),
        ("started / finished", f"{run.started or '-'} / {run.finished or '-'}"),
        ("hosts", ", ".join(run.hosts) or ", ".join(n.host for n in report.nodes)),
        ("envbuild", version_text(report)), *[(k, str(v).replace("`", "")) for k, v in run_notes(run)],
        *([("offline bundle", f"{run.bundle.digest} ({run.bundle.file}); {bundle_text(run.bundle)}")]
          if run.bundle else [])]])
    summary += ('<tr><th>command line</th><td class="cmd" id="argv">'
                + escape(shlex.join(run.argv) if run.argv else "-") + "</td></tr></table>")
    carried = [f"{n.host}: from run {n.evidence_from}" for n in report.nodes if n.evidence_from]
    bench_rows = [(n.host, b) for n in report.nodes for b in n.benchmarks]
    bench = table(["node", "benchmark", "value", "unit", "threshold", "published", "spread (min - max)", "result"],
                  ["<tr>" + td(h) + td(b.name) + td(fmt_num(b.value)) + td(b.unit) + td(fmt_num(b.threshold))
                   + td(published_text(b)) + td(spread_text(b))
                   + ok_cell(b.passed, "pass", "FAIL") + "</tr>" for h, b in bench_rows]
                  ) if bench_rows else "<p>No benchmark results.</p>"
    if carried:
        bench = (f"<p>Smoke and benchmarks carried forward ({escape('; '.join(carried))}): this run had nothing "
                 "to do and the environment's fingerprint is the same.</p>") + bench
    sources = sorted({(b.published, b.published_source) for _, b in bench_rows if b.published_source},
                     key=lambda x: (x[0] or 0, x[1] or ""))
    judged = [(h, b) for h, b in bench_rows if b.verdict]
    if judged:  # the judge's stored verdicts, naming both records where a reference was the yardstick
        bench += "<ul>" + "".join(
            f"<li>{escape(h)}: {escape(b.name)}: <b>{escape(b.verdict)}</b>: {escape(b.reason)}"
            + (f"<br>compared with: {escape(b.compared_with)}" if b.compared_with else "")
            + (f"<br>this run's record: <code>{escape(b.record)}</code>" if b.record else "")
            + (f"; the reference: <code>{escape(b.reference)}</code>" if b.reference else "") + "</li>"
            for h, b in judged) + "</ul>"
    if sources:
        bench += "<p>Published figures: " + "; ".join(f"{escape(fmt_num(v))} from {escape(src or '')}"
                                                      for v, src in sources) + "</p>"
    deviations = ""
    if report.deviations:
        deviations = ("<h2>Deviations from the published instructions</h2><details open><summary>"
                      f"{len(report.deviations)} deviation(s)</summary>"
                      + table(["id", "published", "problem", "instead", "status"],
                              ["<tr>" + td(d.id) + td(d.published) + td(d.problem) + td(d.instead)
                               + td(d.status_text(), "bad" if d.status == "open" else "") + "</tr>"
                               for d in report.deviations])
                      + "</details>")
    return sitetemplates.render("report.html.j2", {
        "recipe": run.recipe, "target": run.target, "status": v.status, "status_class": v.status.replace(" ", "-"),
        "css": Markup(CSS), "reasons": Markup(reasons) if reasons else None, "pass_text": PASS_TEXT,
        "badges": Markup(badges(report)), "summary": Markup(summary), "overview": Markup(overview(report)),
        "chart": Markup(bar_chart(bench_rows)), "bench": Markup(bench), "pipelines": Markup(pipelines(report)),
        "launch": Markup(launch_section(report.launch)), "import_cost": Markup(import_costs(report)),
        "deviations": Markup(deviations), "details": Markup("".join(node_details(n) for n in report.nodes)),
        "version": report.envbuild_version or "?"}, site)
