"""The ACM artifact badges a run's evidence supports (pure: a Report in, badges out).

ACM's Artifact Review and Badging, version 1.1
(https://www.acm.org/publications/policies/artifact-review-and-badging-current): reviewers award
the badges; this module says, criterion by criterion, which of them the run's evidence supports
and which evidence is missing. ``CRITERIA`` is the table: each row a badge, what it asks, and the
check over the report that returns (met, evidence). A badge is supported when every one of its
rows is met. docs/reports.md states what each badge asks, in ACM's words and in envbuild's.

- Artifacts Available (ACM: the authors' artifacts placed on a publicly accessible archival
  repository, with a DOI or a link and a unique identifier): the published artifact at an archive
  address (a DOI), and every git source at the commit the lock names (the unique identifier).
- Artifacts Evaluated - Functional (ACM: documented, consistent, complete, exercisable, with
  evidence of verification and validation): the run finished on every node, preflight passed,
  the installed state was observed as locked, the smoke trained and all-reduced.
- Results Reproduced (ACM v1.1: the main results obtained by a person or team other than the
  authors, using, in part, the authors' artifacts): Functional, the recipe's own benchmark
  measured on the GPU model and count of the published figure (``benchmark.published``: value,
  gpu, gpus) and within ``PUBLISHED_WITHIN`` of it, or meeting a threshold its authors stated
  for that hardware (``benchmark.threshold`` with ``threshold_gpu``/``threshold_gpus``, its
  ``source`` at the published artifact's own location).

A PASS against envbuild's own run on the same GPU (a reference recorded in docs/results) shows
that the setup repeats here: it is stated apart (``repeatability``), never as a badge. Results
Replicated (ACM v1.1: obtained without the authors' artifacts) never applies, as envbuild rebuilds
the authors' artifacts; Artifacts Evaluated - Reusable asks a reviewer's judgement of the
artifact's documentation and structure, which a run cannot show: neither is shown.

Available and Reproduced are about an artifact someone published and its results: for a setup
of envbuild's own (its ``published`` is an ``envbuild:`` address, as the quick start's demo)
they do not apply, said as "not applicable" with why, never as supported. Their criteria are
still judged and shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from urllib.parse import urlsplit

from envbuild.report.model import Badge, BadgeCriterion, Benchmark, Report
from envbuild.report.render_md import fmt_num

ACM_PAGE = "https://www.acm.org/publications/policies/artifact-review-and-badging-current"
PUBLISHED_WITHIN = 0.05  # met: >= 95 % of a higher-is-better published figure, <= 105 % of a lower-is-better one
ARCHIVES = ("doi.org/", "zenodo.org/", "figshare.com/", "softwareheritage.org/", "archive.org/")
FORGES = ("github.com", "gitlab.com", "bitbucket.org")  # a project's home there is owner/name

NAMES = {"available": "Artifacts Available", "functional": "Artifacts Evaluated - Functional",
         "reproduced": "Results Reproduced"}
ACM = {"available": "author-created artifacts placed on a publicly accessible archival repository, with a DOI "
                    "or a link and a unique identifier (ACM v1.1)",
       "functional": "documented, consistent, complete and exercisable, with evidence of verification and "
                     "validation (ACM v1.1)",
       "reproduced": "the main results obtained by a person or team other than the authors, using, in part, "
                     "the authors' artifacts (ACM v1.1)"}

Check = Callable[[Report], "tuple[bool, str]"]


@dataclass(frozen=True)
class Criterion:
    badge: str  # available | functional | reproduced
    id: str
    requirement: str
    check: Check


def _nodes(report: Report, what: str, bad: list[str]) -> tuple[bool, str]:
    n = len(report.nodes)
    if not n:
        return False, "no node in the run"
    if bad:
        return False, f"{what} on {len(bad)} of {n} node(s): not on {', '.join(bad)}"
    return True, f"{what} on all {n} node(s)"


def archived(report: Report) -> tuple[bool, str]:
    url = report.recipe.published or ""
    if any(a in url for a in ARCHIVES):
        return True, f"published at {url}"
    return False, (f"published at {url}, not an archive address (no DOI)" if url
                   else "the recipe names no published location")


def pinned(report: Report) -> tuple[bool, str]:
    gits = [p for n in report.nodes for p in n.pins if p.kind == "git"]
    if not report.recipe.lock_digest:
        return False, "no lock recorded for the run"
    bad = sorted({p.name for p in gits if not p.ok or not p.expected or len(p.expected) < 40})
    if bad:
        return False, f"git source(s) not at their pinned commit: {', '.join(bad)}"
    names = sorted({p.name for p in gits})
    return True, (f"lock {report.recipe.lock_digest[:12]}; git at pinned commits: {', '.join(names)}" if names
                  else f"lock {report.recipe.lock_digest[:12]}; no git sources")


def finished(report: Report) -> tuple[bool, str]:
    bad = [n.host for n in report.nodes if not n.result or n.result.status != "ok"]
    ok, text = _nodes(report, "provisioned", bad)
    if report.run.status != "ok":
        return False, f"run status {report.run.status}; {text}"
    return ok, text


def preflight(report: Report) -> tuple[bool, str]:
    return _nodes(report, "preflight passed", [n.host for n in report.nodes if n.preflight and not n.preflight.ok])


def installed(report: Report) -> tuple[bool, str]:
    bad = [n.host for n in report.nodes if not n.observed or n.drift or any(not p.ok for p in n.pins)]
    ok, text = _nodes(report, "observed as locked, no drift", bad)
    pins = sum(len(n.pins) for n in report.nodes)
    return ok, f"{text} ({pins} pins checked)" if ok else text


def exercised(report: Report) -> tuple[bool, str]:
    unrun = [n.host for n in report.nodes if not n.smoke_ok]  # a node's carried-forward smoke counts
    if report.run.smoke_skipped and unrun:
        failed = [n.host for n in report.nodes if n.smoke_ok and not all(n.smoke_ok.values())]
        where = ("nothing exercised the environment" if len(unrun) == len(report.nodes)
                 else f"on {', '.join(unrun)} (the others' from an earlier run)")
        return False, (f"the smoke was not run (provision --no-smoke): {where}"
                       + (f"; not passed on {', '.join(failed)}" if failed else ""))
    bad = [n.host for n in report.nodes if not n.smoke_ok or not all(n.smoke_ok.values())]
    ok, text = _nodes(report, "smoke ran and passed", bad)
    kinds = sorted({k for n in report.nodes for k in n.smoke_ok})
    return ok, f"{text} ({', '.join(kinds)})" if ok else text


def functional(report: Report) -> tuple[bool, str]:
    missing = [c.id for c in CRITERIA if c.badge == "functional" and not c.check(report)[0]]
    return (False, f"not functional: {', '.join(missing)}") if missing else (True, "every Functional criterion met")


def _native(report: Report) -> list[tuple[str, Benchmark]]:
    return [(n.host, b) for n in report.nodes for b in n.benchmarks if b.name.startswith("native.")]


def measured(report: Report) -> tuple[bool, str]:
    rows = _native(report)
    if not rows:
        return False, "the recipe's own benchmark did not run" + (" (provision --no-smoke)"
                                                                  if report.run.smoke_skipped else "")
    missing = [h for h, b in rows if b.value is None]
    if missing:
        return False, f"{rows[0][1].name} has no value on {', '.join(missing)}"
    return True, "; ".join(f"{h}: {b.name} = {fmt_num(b.value)} {b.unit}".rstrip() for h, b in rows)


def _home(url: str | None) -> str:
    """Where a project lives: host and owner/name on a forge, else the host ("" for no URL)."""
    parts = urlsplit(url or "")
    host = parts.netloc.lower().removeprefix("www.")
    if host in FORGES:
        return host + "/" + "/".join(parts.path.strip("/").split("/")[:2]).lower()
    return host


def authors_threshold(report: Report, b: Benchmark) -> bool:
    """Whether ``b`` was judged by a threshold its authors stated for a GPU model: one that
    names its hardware (``threshold_gpu``), cited at the published artifact's own location."""
    c = b.compared
    return (c is not None and c.kind == "threshold" and bool(c.gpu) and bool(_home(c.source))
            and _home(c.source) == _home(report.recipe.published))


def _run_gpu(report: Report, host: str, b: Benchmark) -> tuple[str | None, int | None]:
    """The GPU model and count ``b`` ran on: the judge's, else the node's facts."""
    node = next((n for n in report.nodes if n.host == host), None)
    facts = node.facts if node is not None else None
    return (b.gpu or (facts.gpu if facts is not None else None),
            b.gpus or (facts.gpu_count if facts is not None and facts.gpu_count else None))


def _hardware(report: Report, host: str, b: Benchmark) -> tuple[bool, str]:
    """Whether ``b`` ran on the GPU model and count its authors measured on (the published
    figure's, or the authors' threshold's), in words."""
    gpu, gpus = _run_gpu(report, host, b)
    ran = f"{gpus or '?'} x {gpu or 'an unknown GPU'}"
    if authors_threshold(report, b):
        c = b.compared
        assert c is not None
        what = f"the authors' threshold's {c.gpus or '?'} x {c.gpu}"
        if c.gpus is None or c.gpus != gpus or c.normalisation:
            return False, f"{host}: ran on {ran}, not {what} (the count must be the same)"
        return True, f"{host}: ran on {ran}, {what}"
    if b.published_gpu is None:
        why = ("the published figure names no GPU model" if b.published_source
               else "the recipe states no published figure and no threshold of its authors for a GPU")
        return False, f"{host}: {why}"
    what = f"the published figure's {b.published_gpus or '?'} x {b.published_gpu}"
    if b.published is None:  # the judge found another model (or none known)
        return False, f"{host}: ran on {ran}, not {what} ({b.published_not_compared or 'another GPU model'})"
    if b.published_gpus is None:
        return False, (f"{host}: ran on {ran}; the published figure names no GPU count, so the same hardware "
                       "is not shown")
    if gpus != b.published_gpus:
        return False, f"{host}: ran on {ran}, not {what}"
    return True, f"{host}: ran on {ran}, {what}"


def published_share(b: Benchmark) -> float | None:
    """``b``'s figure as a percentage of its published one on the same GPU model (the judge's
    ``published_percent``, else the two values); None without both."""
    if b.published_percent is not None:
        return b.published_percent
    return b.value / b.published * 100.0 if b.value is not None and b.published else None


def published_met(b: Benchmark) -> bool | None:
    """Whether ``b`` is within PUBLISHED_WITHIN of its published figure (None: not comparable)."""
    pct = published_share(b)
    if pct is None:
        return None
    return pct >= (1 - PUBLISHED_WITHIN) * 100 if b.higher_is_better else pct <= (1 + PUBLISHED_WITHIN) * 100


def published_hardware(report: Report) -> tuple[bool, str]:
    rows = [(h, b) for h, b in _native(report) if b.value is not None]
    if not rows:
        return False, "no measured value"
    judged = [_hardware(report, h, b) for h, b in rows]
    return all(ok for ok, _ in judged), "; ".join(text for _, text in judged)


def matches(report: Report) -> tuple[bool, str]:
    rows = [(h, b) for h, b in _native(report) if b.value is not None]
    if not rows:
        return False, "no measured value to compare"
    out, ok = [], True
    for host, b in rows:
        on_hw = _hardware(report, host, b)[0]
        if authors_threshold(report, b):
            c = b.compared
            assert c is not None
            met = on_hw and bool(b.passed)
            out.append(f"{host}: {'meets' if b.passed else 'misses'} the authors' threshold {fmt_num(c.value)} "
                       f"({c.source})" + ("" if on_hw else ", not on its hardware"))
        elif b.published_source and b.published is not None and (pct := published_share(b)) is not None:
            met = on_hw and bool(published_met(b))
            need = (f">= {100 * (1 - PUBLISHED_WITHIN):g}%" if b.higher_is_better
                    else f"lower is better: <= {100 * (1 + PUBLISHED_WITHIN):g}%")
            value = f"{fmt_num(b.value)} {b.unit}".rstrip()
            out.append(f"{host}: {value} is {pct:.1f}% of the published {fmt_num(b.published)} ({need} needed)"
                       + ("" if on_hw else "; not on the published hardware"))
        else:
            met = False
            why = (f"the published figure is not compared ({b.published_not_compared})" if b.published_source
                   else "no published figure and no threshold of its authors")
            out.append(f"{host}: {why}")
        ok = ok and met
    return ok, "; ".join(out)


def repeatability(report: Report) -> list[str]:
    """Each node's run judged against envbuild's own earlier runs on its GPU: how the setup
    repeats here, stated apart from the badges (a repeat by the same team on the same setup is
    ACM's repeatability, not a reproduced result)."""
    out = []
    for host, b in _native(report):
        c = b.compared
        if c is None or c.kind != "reference":
            continue
        n = len(c.runs) or 1
        spread = f"spread {c.spread:.1%}" if c.spread is not None else "spread not measured"
        tol = f", tolerance {c.tolerance:.1%}" if c.tolerance is not None else ""
        share = ""
        if b.value and c.value:
            share = (f" at {b.value / c.value:.1%} of their {c.statistic or 'value'}" if b.higher_is_better
                     else f" at {c.value / b.value:.1%} of the speed of their {c.statistic or 'value'}")
        out.append(f"{host}: repeatable here: {n} run(s) on {c.gpus or '?'} x {c.gpu or '?'}, {spread}{tol}; this "
                   f"run {b.verdict or '?'}{share} ({c.source or 'reference'})")
    return out


CRITERIA: tuple[Criterion, ...] = (
    Criterion("available", "archived", "the published artifact has a DOI or archive address", archived),
    Criterion("available", "pinned", "every git source at the commit the lock names (its unique identifier)",
              pinned),
    Criterion("functional", "finished", "the run finished and every node provisioned", finished),
    Criterion("functional", "preflight", "every node passed preflight", preflight),
    Criterion("functional", "installed", "installed state observed as locked, no drift", installed),
    Criterion("functional", "exercised", "the smoke trained and all-reduced on every node", exercised),
    Criterion("reproduced", "functional", "the Functional criteria are met", functional),
    Criterion("reproduced", "measured", "the recipe's own benchmark measured on its nodes", measured),
    Criterion("reproduced", "published-hardware", "run on the GPU model and count of the published figure "
              "(or of a threshold its authors stated)", published_hardware),
    Criterion("reproduced", "matches", f"within {PUBLISHED_WITHIN:.0%} of the published figure, or meets the "
              "authors' threshold for that hardware", matches),
)


OWN = "envbuild:"  # the address of a setup of envbuild's own (cpu-reference: the README's quick start)


def not_applicable(report: Report, bid: str) -> str:
    """Why badge ``bid`` does not apply to the run's recipe ("" where it does)."""
    url = report.recipe.published or ""
    if bid in ("available", "reproduced") and url.startswith(OWN):
        return (f"nothing was published: {url} is envbuild's own setup, not a third-party artifact "
                + ("to archive" if bid == "available" else "with results to reproduce"))
    return ""


def assess(report: Report) -> list[Badge]:
    """Each ACM badge with its criteria judged on ``report``."""
    badges = []
    for bid in NAMES:
        crit = [BadgeCriterion(id=c.id, requirement=c.requirement, met=met, evidence=evidence)
                for c in CRITERIA if c.badge == bid for met, evidence in [c.check(report)]]
        why = not_applicable(report, bid)
        badges.append(Badge(id=bid, name=NAMES[bid], acm=ACM[bid], supported=not why and all(c.met for c in crit),
                            criteria=crit, not_applicable=why))
    return badges
