"""Differences between two reports (pure): fingerprint, packages, SHAs, facts, benchmarks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envbuild.errors import InputError
from envbuild.report.collect import collect
from envbuild.report.model import NodeReport, Report
from envbuild.report.render_json import parse_report
from envbuild.userfile import read_text


@dataclass(frozen=True)
class Difference:
    """One thing that differs between report A and report B."""

    area: str  # fingerprint | package | git | extension | env | facts | benchmark | verdict | node
    host: str | None
    subject: str
    a: str | None
    b: str | None
    environment: bool = True  # False for numbers/verdicts that do not make environments differ


def load_report(path: str | Path) -> Report:
    """A report JSON file, or a run directory (collected on the fly)."""
    p = Path(path)
    if p.is_dir():
        return collect(p)
    if not p.exists():
        raise InputError(f"{p} does not exist", hint="pass a report JSON (envbuild report --format json) or a run directory")
    return parse_report(read_text(p, "report JSON file"), str(p))


def _pair_nodes(a: Report, b: Report) -> list[tuple[str, NodeReport | None, NodeReport | None]]:
    """Nodes matched by host name; when host names differ, by position."""
    ah, bh = {n.host: n for n in a.nodes}, {n.host: n for n in b.nodes}
    if set(ah) & set(bh):
        return [(h, ah.get(h), bh.get(h)) for h in sorted(set(ah) | set(bh))]
    pairs = []
    for i in range(max(len(a.nodes), len(b.nodes))):
        na = a.nodes[i] if i < len(a.nodes) else None
        nb = b.nodes[i] if i < len(b.nodes) else None
        pairs.append((f"{na.host if na else '-'}/{nb.host if nb else '-'}", na, nb))
    return pairs


def _dict_diff(area, host, a: dict, b: dict, environment=True) -> list[Difference]:
    return [Difference(area, host, k, None if a.get(k) is None else str(a.get(k)),
                       None if b.get(k) is None else str(b.get(k)), environment)
            for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def diff_reports(a: Report, b: Report) -> list[Difference]:
    """Everything that differs; environments differ iff some difference has environment=True."""
    out: list[Difference] = []
    if a.fingerprint != b.fingerprint:
        out.append(Difference("fingerprint", None, "environment", a.fingerprint, b.fingerprint))
    if a.recipe.lock_digest != b.recipe.lock_digest:
        out.append(Difference("lock", None, "lock digest", a.recipe.lock_digest, b.recipe.lock_digest))
    if a.verdict.status != b.verdict.status:
        out.append(Difference("verdict", None, "verdict", a.verdict.status, b.verdict.status, False))
    for host, na, nb in _pair_nodes(a, b):
        if na is None or nb is None:
            out.append(Difference("node", host, "present", "yes" if na else None, "yes" if nb else None))
            continue
        for kind in ("package", "git", "extension", "env"):
            pa = {p.name: p.observed for p in na.pins if p.kind == kind}
            pb = {p.name: p.observed for p in nb.pins if p.kind == kind}
            out += _dict_diff(kind, host, pa, pb)
        fa = na.facts.model_dump() if na.facts else {}
        fb = nb.facts.model_dump() if nb.facts else {}
        fa.pop("origin", None), fb.pop("origin", None)
        out += _dict_diff("facts", host, fa, fb)
        ba = {x.name: x.value for x in na.benchmarks}
        bb = {x.name: x.value for x in nb.benchmarks}
        out += _dict_diff("benchmark", host, ba, bb, environment=False)
    return out


def environments_differ(diffs: list[Difference]) -> bool:
    return any(d.environment for d in diffs)
