"""What a site's scheduler requires of every job (a table of rows with sources; pure).

ALCF Polaris's PBS refuses a ``qsub`` without a project (``-A``) and a queue (``-q``). The rows
are keyed by target and scheduler; ``envbuild launch`` refuses to render a job the site would
reject and names the flags that fix it.

Kept here, not in the target profile, for one reason (marked, to move): the shipped locks
record a digest of the whole target profile, so a field added to polaris.yaml would make its
lock stale, and that lock can only be regenerated with the setups' git mirrors (not reachable
from this workplace).
"""

from __future__ import annotations

from dataclasses import dataclass

WHAT = {"--account": "a project (account)", "--partition": "a queue (partition)"}
EXAMPLE = {"--account": "PROJECT", "--partition": "QUEUE"}


@dataclass(frozen=True)
class Site:
    target: str
    scheduler: str  # the launch --scheduler value
    required: tuple[str, ...]  # launch flags the site's scheduler requires
    source: str


SITES: tuple[Site, ...] = (
    Site("polaris", "pbs", ("--account", "--partition"),
         "https://docs.alcf.anl.gov/polaris/running-jobs/ : qsub needs -A <project> and -q <queue>, "
         "e.g. -q debug or -q prod"),
)


def site(target: str, scheduler: str) -> Site | None:
    """The row for ``target`` under ``scheduler``; None when nothing is required."""
    return next((s for s in SITES if s.target == target and s.scheduler == scheduler), None)
