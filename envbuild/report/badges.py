"""The ACM artifact badges a run's evidence supports (pure: a Report in, badges out).

ACM's badges (https://www.acm.org/publications/policies/artifact-review-and-badging-current)
are awarded by reviewers; this module says, criterion by criterion, which of them the run's
evidence supports and which evidence is missing. ``CRITERIA`` is the table: each row a badge,
what it asks, and the check over the report that returns (met, evidence). A badge is supported
when every one of its rows is met.

- Artifacts Available: archived where it cannot move (a DOI or an archive address), every git
  source pinned to a commit and every package installed with a verified hash.
- Artifacts Evaluated - Functional: the run finished on every node, preflight passed, the
  installed state was observed and matches the lock, the smoke trained and all-reduced.
- Results Reproduced: Functional, and the recipe's own benchmark was measured and meets its
  threshold. A recipe without a threshold is NOT JUDGED and never supports it: the evidence
  says whether the value is within ``REPRODUCED_WITHIN`` of the published figure (same GPU
  model only), as information.

Available and Reproduced are about an artifact someone published and its results: for a setup
of envbuild's own (its ``published`` is an ``envbuild:`` address, as the quick start's demo)
they do not apply, said as "not applicable" with why, never as supported. Their criteria are
still judged and shown (the verdict reads them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from envbuild.report.model import Badge, BadgeCriterion, Benchmark, Report
from envbuild.report.render_md import fmt_num

REPRODUCED_WITHIN = 0.10  # a measured value within 10 % of the published figure (no threshold)
ARCHIVES = ("doi.org/", "zenodo.org/", "figshare.com/", "softwareheritage.org/", "archive.org/")

NAMES = {"available": "Artifacts Available", "functional": "Artifacts Evaluated - Functional",
         "reproduced": "Results Reproduced"}
ACM = {"available": "placed on a publicly accessible archival repository, with a DOI or a link "
                    "and a unique identifier",
       "functional": "documented, consistent, complete and exercisable",
       "reproduced": "the main results obtained again by others, with the authors' artifacts"}

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


def hashed(report: Report) -> tuple[bool, str]:
    unverified = sorted({u for n in report.nodes for u in n.unverified})
    if unverified:
        return False, f"installed without a verified hash: {', '.join(unverified)}"
    return True, "every locked package installed with its hash"


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
        return False, "the recipe's own benchmark did not run"
    missing = [h for h, b in rows if b.value is None]
    if missing:
        return False, f"{rows[0][1].name} has no value on {', '.join(missing)}"
    return True, "; ".join(f"{h}: {b.name} = {fmt_num(b.value)} {b.unit}".rstrip() for h, b in rows)


def close_to_published(b: Benchmark) -> bool | None:
    """Whether ``b`` is no worse than its published figure by more than REPRODUCED_WITHIN."""
    if b.value is None or b.published is None:
        return None
    if b.higher_is_better:
        return b.value >= b.published * (1 - REPRODUCED_WITHIN)
    return b.value <= b.published * (1 + REPRODUCED_WITHIN)


def matches(report: Report) -> tuple[bool, str]:
    rows = [(h, b) for h, b in _native(report) if b.value is not None]
    if not rows:
        return False, "no measured value to compare"
    out, ok = [], True
    for host, b in rows:
        if b.threshold is not None:
            ok = ok and bool(b.passed)
            out.append(f"{host}: {'meets' if b.passed else 'misses'} the threshold {fmt_num(b.threshold)}")
        elif b.reference is not None and b.passed is not None:  # the judge's same-GPU reference
            ok = ok and bool(b.passed)
            out.append(f"{host}: {'meets' if b.passed else 'misses'} the {b.compared_with}")
        elif b.published is not None:  # shown beside the figure, never a judgement (NOT JUDGED)
            near = close_to_published(b)
            ok = False
            out.append(f"{host}: not judged, the recipe sets no threshold ({'within' if near else 'not within'} "
                       f"{REPRODUCED_WITHIN:.0%} of the published {fmt_num(b.published)}, shown, not judged)")
        else:
            ok = False
            out.append(f"{host}: not judged, no threshold and no published figure to compare {b.name} against")
    return ok, "; ".join(out)


CRITERIA: tuple[Criterion, ...] = (
    Criterion("available", "archived", "the published artifact has a DOI or archive address", archived),
    Criterion("available", "pinned", "every git source pinned to a commit, as recorded in the lock", pinned),
    Criterion("available", "hashed", "every package installed with a verified hash", hashed),
    Criterion("functional", "finished", "the run finished and every node provisioned", finished),
    Criterion("functional", "preflight", "every node passed preflight", preflight),
    Criterion("functional", "installed", "installed state observed as locked, no drift", installed),
    Criterion("functional", "exercised", "the smoke trained and all-reduced on every node", exercised),
    Criterion("reproduced", "functional", "the Functional criteria are met", functional),
    Criterion("reproduced", "measured", "the recipe's own benchmark measured on its nodes", measured),
    Criterion("reproduced", "matches", "the measurement meets the recipe's threshold", matches),
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
