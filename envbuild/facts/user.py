"""The login user's environment on a node: ``$HOME``, ``$PATH`` and the user name.

The planner needs them to write absolute paths (``~/.envbuild`` on the node) and the search
path of build commands; they are facts like any other, gathered in the same round trip.

    >>> parse_user_env("HOME=/root\\nPATH=/usr/bin:/bin\\nUSER=root\\n")
    {'HOME': '/root', 'PATH': '/usr/bin:/bin', 'USER': 'root'}
"""

from __future__ import annotations

from envbuild.facts.probe import Probe

PROBES = [Probe("user_env", 'printf "HOME=%s\\nPATH=%s\\nUSER=%s\\n" "$HOME" "$PATH" "$(id -un 2>/dev/null)"')]


def parse_user_env(text: str) -> dict[str, str]:
    """``KEY=value`` lines -> dict; empty values and other lines are dropped."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key in ("HOME", "PATH", "USER") and value.strip():
            out[key] = value.strip()
    return out
