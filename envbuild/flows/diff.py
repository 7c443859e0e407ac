"""The diff flow: what differs between two reports (report JSON files or run directories,
``envbuild.report.diff``).

``diff(DiffRequest(a, b)) -> DiffOutcome``: every difference (fingerprint, packages, SHAs,
.so hashes, facts, benchmark numbers) and whether the environments differ (benchmark numbers
and verdicts are shown but do not make environments differ).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from envbuild.report.diff import Difference


@dataclass(frozen=True)
class DiffRequest:
    """The two reports: each a report JSON file or a run directory."""

    report_a: Path
    report_b: Path


@dataclass(frozen=True)
class DiffOutcome:
    differences: list[Difference] = field(default_factory=list)
    environments_differ: bool = False

    def to_dict(self) -> dict:
        return {"environments_differ": self.environments_differ, "differences": [asdict(d) for d in self.differences]}


def diff(request: DiffRequest) -> DiffOutcome:
    """Load both reports and compare them (see the module docstring)."""
    from envbuild.report.diff import diff_reports, environments_differ, load_report

    diffs = diff_reports(load_report(request.report_a), load_report(request.report_b))
    return DiffOutcome(diffs, environments_differ(diffs))
