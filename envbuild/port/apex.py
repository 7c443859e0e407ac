"""The Apex commit and build options of a ported recipe, by the policy envbuild already has:
the Apex rows of the preflight (``envbuild.compat.rules_apex``: torch._six, torch.library,
nvcc 13 and sm_70, options removed from master...) over the known commits
(``envbuild.compat.commits.APEX_COMMITS``) and the option table
(``envbuild.patches.apex_options``). The published commit stays when no row refuses it on the
new stack; otherwise the first known commit after it (by date) that no row refuses. A published
commit the table lacks (its date unknown, so no date-based row can judge it) is placed by its
committer date in the git mirror: the first known commit not older than it that no row refuses.

    choose_apex(published_sha, options, lambda sha, opts: recipe_with(sha, opts), target, facts)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date

from envbuild.compat import commits as cm
from envbuild.compat.check import preflight
from envbuild.compat.rules import RULES
from envbuild.errors import CheckFailed
from envbuild.facts.model import NodeFacts
from envbuild.patches.apex_options import option_row
from envbuild.recipes.schema import Recipe
from envbuild.targets.schema import Target

#: the rows that judge an Apex commit against torch, nvcc and the options (errors only)
APEX_ROWS = [r for r in RULES if r.id.startswith("apex-") and r.severity == "error"]


@dataclass(frozen=True)
class ApexChoice:
    """The commit (``sha``, its ``date``), the options kept and dropped, and why each earlier
    candidate was refused (``refused``: sha -> the rows' messages)."""

    sha: str
    date: str
    options: list[str]
    dropped: list[str]
    kept: bool
    refused: dict[str, list[str]] = field(default_factory=dict)


def _full(c: cm.KnownCommit) -> bool:
    return len(c.sha) == 40


def candidates(published: str | None, published_date: str | None = None) -> list[cm.KnownCommit]:
    """The published commit (when known), then every known commit after it, oldest first;
    with no published commit (an Apex that came with an image or module), every known one.
    A published commit the table lacks, whose date the mirror gave (``published_date``), is
    one the rows cannot judge: the known commits not older than it (itself where there is
    none, as without a date)."""
    known = sorted((c for c in cm.apex_commits() if _full(c)), key=lambda c: c.date)
    row = next((c for c in known if published and c.sha.startswith(published)), None)
    if published and row is None:
        later = [c for c in known if published_date and c.date >= published_date]
        return later or [cm.KnownCommit(published, "", "not in envbuild/compat/commits.py")] + known
    return [c for c in known if row is None or c.date >= row.date]


def options_at(options: list[str], day: str) -> tuple[list[str], list[str]]:
    """``(kept, dropped)``: the options that exist at an Apex commit of ``day``."""
    if not day:
        return list(options), []
    kept, dropped = [], []
    for opt in options:
        row = option_row(opt.partition("=")[0])
        gone = row is not None and row.removed is not None and date.fromisoformat(day) >= date.fromisoformat(row.removed)
        (dropped if gone else kept).append(opt)
    return kept, dropped


def choose_apex(published: str | None, options: list[str], recipe_with: Callable[[str, list[str]], Recipe],
                target: Target, facts: NodeFacts, published_date: str | None = None) -> ApexChoice:
    """See module. ``recipe_with(sha, options)`` is the ported recipe with that Apex;
    ``published_date``: the committer date of a published commit the table lacks, read in the
    mirror (``candidates``). CheckFailed when every known commit is refused (the messages say
    by which rows)."""
    refused: dict[str, list[str]] = {}
    for cand in candidates(published, published_date):
        kept, dropped = options_at(options, cand.date)
        verdict = preflight(recipe_with(cand.sha, kept), target, facts, rules=APEX_ROWS)
        if not verdict.errors:
            return ApexChoice(sha=cand.sha, date=cand.date, options=kept, dropped=dropped,
                              kept=bool(published) and cand.sha.startswith(published or "-"), refused=refused)
        refused[cand.sha] = [f"{v.rule}: {v.message}" for v in verdict.errors]
    raise CheckFailed("no known Apex commit passes the Apex rows on this stack: "
                      + "; ".join(f"{sha[:8]}: {', '.join(m)}" for sha, m in refused.items()),
                      hint="add a commit that does, with its date, to an apex_commits.yaml in a knowledge folder "
                           "(ENVBUILD_KNOWLEDGE_PATH: docs/port.md)")
