"""One row of compatibility knowledge: when it applies, what fails, why, where from, the fix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

from envbuild.compat.context import Context

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Rule:
    """A compatibility row.

    ``when(ctx)`` returns None when the row does not apply (the rule passes) or the concrete
    message (with the node's and recipe's values) when it does. ``what`` is the generic failure,
    ``why`` the mechanism, ``source`` a URL or ``repo@commit:path``, ``fix`` what to change.
    """

    id: str
    severity: Severity
    what: str
    why: str
    source: str
    fix: str
    when: Callable[[Context], str | None]

    def evaluate(self, ctx: Context) -> str | None:
        return self.when(ctx)
