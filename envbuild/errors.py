"""One error root for everything envbuild refuses, each with a hint and an exit code.

The CLI prints ``error: <message>`` and ``hint: <hint>`` and exits with ``exit_code``;
a traceback is shown only with ``--debug``.

Exit codes (documented in the README):
    0  success / feasible / lock up to date
    1  a check failed: infeasible preflight, stale lock, drift, failed provision
    2  bad input: malformed recipe/target/facts file, unknown name, bad option
    3  environment problem: host unreachable, git mirror missing, tool not installed
    4  a build or install step failed on a node
    5  not judged: nothing failed, but no threshold decided the verdict (NOT_JUDGED)
"""

from __future__ import annotations


NOT_JUDGED = 5  # the exit code of a verdict that is neither PASS nor FAIL (parse, launch, report, provision)


class EnvbuildError(Exception):
    """Root of all errors envbuild reports to users."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None, *, where: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.where = where  # "file:line" or "file:line: field"

    def __str__(self) -> str:  # one line, with location first
        return f"{self.where}: {self.message}" if self.where else self.message


class InputError(EnvbuildError):
    """A user file or argument is malformed, unknown or inconsistent."""

    exit_code = 2


class CheckFailed(EnvbuildError):
    """A check ran and said no (preflight infeasible, stale lock, drift)."""

    exit_code = 1


class EnvironmentProblem(EnvbuildError):
    """Something outside envbuild is missing or unreachable (host, mirror, tool)."""

    exit_code = 3


class StepFailed(EnvbuildError):
    """A provisioning step failed on a node."""

    exit_code = 4
