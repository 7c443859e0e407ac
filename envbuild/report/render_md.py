"""The report as Markdown: verdict first, short tables, diffs last (pure, byte-stable).

Every value is printed as literal text, as the HTML report escapes it (``html.escape``): a
recipe title, a host, a log's message cannot carry raw HTML (``<script>``), a link
(``[x](javascript:...)``, ``<javascript:...>``) or a code fence into a renderer that does not
sanitise. ``md`` escapes a value in running text, ``code`` makes one a code span that it cannot
leave, ``fence`` a fenced block that it cannot close, and every table cell passes ``inert``.
"""

from __future__ import annotations

import re
import shlex

from envbuild.render import sitetemplates
from envbuild.report.model import Badge, LaunchJob, NodeReport, Report


def short(value: str | None, n: int = 12) -> str:
    """A SHA or hash shortened for tables; '-' for None."""
    if value is None:
        return "-"
    return value[:n] if len(value) == 40 or len(value) == 64 else value


_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")  # where CommonMark starts raw HTML or an autolink
_TICKS = re.compile(r"`+")


def _escape(text: str) -> str:
    """Running text made literal: backslash, backtick and brackets escaped (no code span, link or
    image can start), ``<`` before a tag or autolink written ``&lt;``, lines joined."""
    text = re.sub(r"([\\`\[\]])", r"\\\1", " ".join(text.splitlines()))
    return _TAG_START.sub("&lt;", text)


def md(value) -> str:
    """A value as literal Markdown text (the Markdown report's ``html.escape``).

    >>> md('Demo <script>alert(1)</script> [x](javascript:alert(1))')
    'Demo &lt;script>alert(1)&lt;/script> \\\\[x\\\\](javascript:alert(1))'
    """
    return _escape("" if value is None else str(value))


def code(value) -> str:
    """``value`` as one code span it cannot leave (a backtick run longer than any inside it)."""
    text = " ".join(str(value).splitlines())
    ticks = "`" * (max((len(m[0]) for m in _TICKS.finditer(text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fence(text: str, info: str = "") -> list[str]:
    """Lines of a fenced code block holding ``text`` that no line of it can close."""
    longest = max((len(m[0]) for m in _TICKS.finditer(text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return [ticks + info, text.rstrip("\n"), ticks]


def inert(text: str) -> str:
    """Markdown made by this module with its values in it, made inert as CommonMark reads it: its
    code spans kept (nothing is interpreted inside one), the text between escaped (``_escape``),
    so a value that closes a span early leaves nothing live either."""
    text = " ".join(text.splitlines())
    runs = list(_TICKS.finditer(text))
    out, pos, i = [], 0, 0
    while i < len(runs):
        close = next((j for j in range(i + 1, len(runs)) if len(runs[j][0]) == len(runs[i][0])), None)
        if close is None:
            i += 1
            continue
        out += [_escape(text[pos:runs[i].start()]), text[runs[i].start():runs[close].end()]]
        pos, i = runs[close].end(), close + 1
    return "".join(out) + _escape(text[pos:])


def cell(value) -> str:
    text = "-" if value is None or value == "" else str(value)
    return inert(text).replace("|", "\\|")


def table(headers: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return out


PASS_TEXT = ("All nodes provisioned, every pin observed as locked, no drift, the smoke passed and the "
             "recipe's benchmark completed and met its threshold on every node.")


def fmt_num(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.4g}" if abs(v) < 1000 else f"{v:,.1f}".removesuffix(".0")


def published_text(b) -> str:
    """The published figure of a benchmark row, or why it is not compared with it."""
    if b.published is None and b.published_not_compared:
        return f"not compared ({b.published_not_compared})"
    return fmt_num(b.published)


def verdict_lines(b) -> list[str]:
    """The judge's stored verdict on a benchmark row: its word and reason, what the figure was
    compared with (the threshold on its GPU, or the reference record) and the judged record."""
    out = [f"Verdict on {md(b.name)}: **{md(b.verdict)}**: {md(b.reason)}".rstrip(": ")]
    if b.compared_with:
        out.append(f"- compared with: {md(b.compared_with)}")
    if b.record:
        out.append(f"- this run's record: {code(b.record)}" + (f"; the reference: {code(b.reference)}" if b.reference else ""))
    return out + [""]


def node_section(n: NodeReport) -> list[str]:
    out = [f"### {md(n.host)}", ""]
    f = n.facts
    if f:
        out += table(["GPU", "driver", "CUDA (driver)", "nvcc", "NCCL", "OS", "glibc", "python"],
                     [[f"{f.gpu_count}x {f.gpu}" if f.gpu else "none", f.driver, f.driver_cuda, f.nvcc, f.nccl,
                       f.os, f.glibc, n.python]]) + [""]
    if n.preflight:
        out.append(f"Preflight: **{md(n.preflight.verdict)}**" + ("" if n.preflight.ok else " (refused)"))
        out += [f"- {md(p)}" for p in n.preflight.problems] + [""]
    if n.result:
        r = n.result
        line = f"Provision: **{md(r.status)}**"
        if r.failed_step:
            line += f" at {code(r.failed_step)} (rc {md(r.rc)}): {code(r.command)}"
        line += f"; {len(r.changed)} changed, {len(r.skipped)} skipped"
        if r.duration_s is not None:
            line += f", {r.duration_s:.1f} s"
        out += [line, ""]
    if n.insecure:
        out += ["**Host keys were NOT checked** for this node (`--insecure`): its identity is unproven.", ""]
    if n.unverified:
        out += ["Installed without a verified hash (allowed by `--allow-unverified`): "
                + ", ".join(code(u) for u in n.unverified), ""]
    if n.drift:
        out += ["Drift:", ""] + table(["kind", "subject", "expected", "observed"],
                                      [[d.kind, d.subject, short(d.expected), short(d.observed)] for d in n.drift]) + [""]
    if n.pins:
        bad = sum(1 for p in n.pins if not p.ok)
        out += [f"Pins: {len(n.pins) - bad} of {len(n.pins)} as expected", ""]
        out += table(["kind", "name", "expected", "observed", "ok"],
                     [[p.kind, p.name, short(p.expected), short(p.observed), "yes" if p.ok else "**NO**"]
                      for p in n.pins]) + [""]
    elif not n.observed:
        out += ["Installed state: not observed", ""]
    if n.patches:
        out += table(["patch", "component", "decision", "status", "why"],
                     [[p.id, p.component, p.decision, p.status, p.reason] for p in n.patches]) + [""]
    if n.decisions:
        out += table(["decision", "outcome", "why"], [[d.subject, d.outcome, d.reason] for d in n.decisions]) + [""]
    if n.evidence_from:
        out += [f"Smoke and benchmarks: from run {code(n.evidence_from)} (this run had nothing to do; the "
                "environment's fingerprint is the same)", ""]
    if n.benchmarks or n.smoke_ok:
        out += table(["benchmark", "value", "unit", "threshold", "published", "spread (min - max)", "result"],
                     [[b.name, fmt_num(b.value), b.unit, fmt_num(b.threshold), published_text(b),
                       f"{fmt_num(b.spread.min)} - {fmt_num(b.spread.max)} (n={b.spread.n})" if b.spread else None,
                       {True: "pass", False: "**FAIL**", None: "-"}[b.passed]] for b in n.benchmarks]
                     + [[f"smoke {k}", "ok" if ok else "not ok", "", "", "", "", "pass" if ok else "**FAIL**"]
                        for k, ok in n.smoke_ok.items()]) + [""]
        out += [line for b in n.benchmarks if b.verdict for line in verdict_lines(b)]
    if n.fingerprint:
        out += [f"Node environment fingerprint: {code(n.fingerprint)}", ""]
    return out


def badges_section(badges: list[Badge], repeatable: list[str] | None = None) -> list[str]:
    """The ACM badges: which ones the run supports, each criterion with its evidence; then, apart,
    how the run repeats envbuild's own runs on its GPU (``repeatable``: never a badge)."""
    if not badges:
        return []
    out = ["## ACM artifact badges", "",
           "Reviewers award the badges; this says which ones the run's evidence supports.", ""]
    out += table(["badge", "supported by this run", "criteria not met"],
                 [[b.name, f"not applicable: {b.not_applicable}" if b.not_applicable else "**yes**" if b.supported else "no",
                   ", ".join(c.id for c in b.criteria if not c.met) or "-"] for b in badges]) + [""]
    out += table(["badge", "criterion", "met", "evidence"],
                 [[b.name, c.requirement, "yes" if c.met else "no", c.evidence] for b in badges for c in b.criteria])
    if repeatable:
        out += ["", "Repeatability (envbuild's own runs on the same GPU; not an ACM badge):", "",
                *[f"- {md(line)}" for line in repeatable]]
    return out + [""]


def bundle_text(bundle) -> str:
    """What a run took from its offline bundle, for the run table of every report format."""
    text = "no network: every wheel and commit from the bundle"
    if not bundle.offline:
        text += "; the bundle said offline: no (its manifest names what the node still fetched)"
    if bundle.prebuilt:
        text += ("; extension wheels built elsewhere and carried by the bundle (sha256 checked), installed "
                 "without a build here: " + ", ".join(bundle.prebuilt))
    if bundle.prebuilt_not_used:
        text += "; extension wheels the bundle carried but this run did not install: " + ", ".join(bundle.prebuilt_not_used)
    return text


def run_notes(run) -> list[list]:
    """Summary rows for a run that did nothing (a no-op) or ran no smoke (--no-smoke)."""
    rows = []
    if run.nothing_to_do is not None:
        prov = run.provisioned_by
        rows.append(["nothing to do", f"{run.nothing_to_do}; provisioned by run `{prov.run_id}`" if prov
                     else f"{run.nothing_to_do}; the run that provisioned is not in this runs folder"])
    if run.smoke_skipped:
        rows.append(["smoke", "not run (provision --no-smoke)"])
    return rows


def launch_section(job: LaunchJob | None) -> list[str]:
    if job is None:
        return []
    out = ["## Launch job", ""]
    out += table(["item", "value"], [[k, v] for k, v in [
        ("scheduler", job.scheduler), ("job", job.job_id), ("state", job.state), ("exit code", job.exit_code),
        ("reason", job.reason), ("node", job.node), ("training command replaced by", job.replaced),
        ("provisioned run", job.provisioned_run)] if v is not None or k in ("state", "exit code")]) + [""]
    if job.output_tail:
        out += ["Output tail:", "", *fence(job.output_tail), ""]
    return out


def fleet_section(nodes: list) -> list[str]:
    """More than one node: one row per node (status, the step it failed at, drift, node kind,
    environment fingerprint)."""
    if len(nodes) < 2:
        return []
    rows = [[n.host, n.result.status if n.result else "not run",
             f"`{n.result.failed_step}`" if n.result and n.result.failed_step else "-",
             str(len(n.drift)) if n.observed else "not observed",
             f"`{n.kind}`" if n.kind else "-", f"`{n.fingerprint[:16]}`" if n.fingerprint else "-"]
            for n in nodes]
    return ["## Fleet", ""] + table(["node", "status", "failed step", "drift", "node kind", "fingerprint"], rows) + [""]


IMPORT_COST_HEAD = ["rank", "host", "environment", "file system", "seconds", "files opened", "folders listed",
                    "modules"]


def pack_note(c) -> str:
    """How a rank's prefix came from the launch's pack, if it did."""
    if not c.from_pack:
        return ""
    return " (mounted from the image)" if c.from_image else " (unpacked from the pack)"


def import_cost_rows(report: Report) -> list[list]:
    """Each rank's import of torch (the collective smoke's), rank order, as table cells."""
    return [[c.rank, c.host, c.prefix + pack_note(c),
             (c.fs_type or "?") + (", shared" if c.shared else ", node-local"), f"{c.seconds:.2f}",
             c.files_opened, c.dirs_listed, c.modules_imported]
            for n in report.nodes for c in sorted(n.import_cost, key=lambda c: c.rank)]


def import_cost_section(report: Report) -> list[str]:
    rows = import_cost_rows(report)
    if not rows:
        return []
    return ["## Import cost", "", "Each rank's `import torch` from its environment (the collective smoke, "
            "before it joins the group): seconds, and the files and folders Python opened and listed to do it "
            "(its audit events; shared libraries the loader maps are not counted).", "",
            *table(IMPORT_COST_HEAD, rows), ""]


def version_line(report: Report) -> str:
    """The envbuild that made the run (the report's own version is in its JSON and HTML: a
    Markdown report stays the same text whichever envbuild renders it)."""
    return report.run.envbuild_version or "not recorded by the run"


def render_md(report: Report, site: tuple[tuple[str, str], ...] = ()) -> str:
    """Markdown text of ``report`` (what the golden test compares): envbuild's template
    (``envbuild/render/jinja/report.md.j2``) of the sections made here, or the site's over it."""
    v, run, rec = report.verdict, report.run, report.recipe
    head = [f"# envbuild report: {md(run.recipe)} on {md(run.target)}", "", f"## Verdict: {md(v.status)}", ""]
    if v.reasons or v.not_judged:
        head += [f"- {md(r.kind)}" + (f" [{md(r.host)}]" if r.host else "") + f": {md(r.message)}" for r in v.reasons]
        head += [f"- not judged: {md(note)}" for note in v.not_judged]
    else:
        head += [PASS_TEXT]
    summary = table(["item", "value"], [
        ["run", f"`{run.run_id}` ({run.status})"],
        ["recipe", f"{rec.name}: {rec.title}" if rec.title else rec.name],
        ["published", rec.published],
        ["lock digest", f"`{rec.lock_digest}`" if rec.lock_digest else None],
        ["fleet fingerprint (all nodes)", f"`{report.fingerprint}`" if report.fingerprint else "not observed"],
        ["started / finished", f"{run.started or '-'} / {run.finished or '-'}"],
        ["hosts", ", ".join(run.hosts) or ", ".join(n.host for n in report.nodes)],
        ["envbuild", version_line(report)],
        ["command line", f"`{shlex.join(run.argv)}`" if run.argv else None],
        *run_notes(run),
        *([["offline bundle", f"`{run.bundle.digest}` ({run.bundle.file}); {bundle_text(run.bundle)}"]]
          if run.bundle else []),
    ])
    deviations = []
    if report.deviations:
        deviations = ["## Deviations from the published instructions", ""] + table(
            ["id", "published", "problem", "instead", "status"],
            [[d.id, d.published, d.problem, d.instead, d.status_text()] for d in report.deviations])
    nodes = ["## Nodes", ""]
    for n in report.nodes:
        nodes += node_section(n)
    diffs: dict[tuple[str, str], list[str]] = {}
    for n in report.nodes:
        for p in n.patches:
            if p.diff:
                diffs.setdefault((p.id, p.diff), []).append(n.host)
    diff_lines = ["## Patch diffs", ""] if diffs else []
    for (pid, diff), hosts in diffs.items():
        diff_lines += [f"### {md(pid)} ({md(', '.join(hosts))})", "", *fence(diff, "diff"), ""]
    text = sitetemplates.render("report.md.j2", {
        "verdict": "\n".join(head), "run": "\n".join(summary),
        "badges": "\n".join(badges_section(report.badges, report.repeatability)),
        "launch": "\n".join(launch_section(report.launch)), "import_cost": "\n".join(import_cost_section(report)),
        "deviations": "\n".join(deviations), "fleet": "\n".join(fleet_section(report.nodes)),
        "nodes": "\n".join(nodes), "diffs": "\n".join(diff_lines)}, site)
    return text.rstrip("\n") + "\n"
