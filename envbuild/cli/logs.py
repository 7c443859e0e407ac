"""Log records of the libraries envbuild drives (paramiko, fabric, ansible-runner...), held.

paramiko's transport thread logs a failed handshake (a port that accepts TCP but does not speak
SSH) as an ERROR record with its traceback, and a logger without handlers falls back to Python's
last-resort handler, which prints WARNING and above to stderr: two tracebacks before envbuild's
own "unreachable" line. Without ``--debug`` the root logger gets a ``NullHandler`` (the last
resort is then never used, and no library's record reaches the user: envbuild reports what went
wrong in its own words); with ``--debug`` a handler prints every library's WARNING and above to
stderr, named by logger.
"""

from __future__ import annotations

import logging
import sys

_HELD = logging.NullHandler()
_SHOWN: list[logging.Handler] = []


def hold_library_logs(debug: bool) -> None:
    """Hold (or, with ``debug``, show) every library's log records; idempotent per call."""
    root = logging.getLogger()
    for handler in [_HELD, *_SHOWN]:
        root.removeHandler(handler)
    _SHOWN.clear()
    if not debug:
        root.addHandler(_HELD)
        return
    shown = logging.StreamHandler(sys.stderr)
    shown.setLevel(logging.WARNING)
    shown.setFormatter(logging.Formatter("debug: %(name)s: %(levelname)s: %(message)s"))
    _SHOWN.append(shown)
    root.addHandler(shown)
