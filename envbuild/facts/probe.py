"""A fact probe: a shell snippet plus the pure parser of what it prints.

All probes of a node run in one shell script (``envbuild.facts.script``), so gathering a node
costs one command (one SSH round trip). A probe exits 127 when its tool is absent; the
gatherer then records the fact under ``NodeFacts.missing`` instead of raising.
"""

from __future__ import annotations

from dataclasses import dataclass

NOT_FOUND = 127  # exit status a probe uses for "tool not installed"
TIMED_OUT = "did not answer"  # the script's word for a command its time bound stopped (``__eb_to``)


@dataclass(frozen=True)
class Probe:
    """``name`` labels the output section; ``command`` is POSIX sh run in a subshell.

    The snippet may use ``$__eb_py`` (the Python whose packages are inspected) and
    ``__eb_to CMD...`` (run with a timeout when ``timeout`` exists).
    """

    name: str
    command: str


@dataclass(frozen=True)
class Section:
    """What one probe printed: stdout, stderr and its exit status."""

    out: str
    err: str = ""
    rc: int = 0

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def not_found(self) -> bool:
        return self.rc == NOT_FOUND

    def why(self, tool: str) -> str:
        """One line explaining why nothing usable came out of ``tool``."""
        if self.not_found:
            return f"{tool} not found"
        bounded = [line.strip() for line in self.err.splitlines() if TIMED_OUT in line]
        if bounded:  # stopped by its time bound: said so, not the shell's "Killed"
            return bounded[0]
        text = (self.err.strip() or self.out.strip()).splitlines()
        first = text[0].strip() if text else "no output"
        return f"{tool} exited {self.rc}: {first}" if self.rc else f"{tool}: {first}"
