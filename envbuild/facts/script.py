"""One shell script for all probes, and the pure splitter of its output into sections.

The script is POSIX sh. Each probe runs in a subshell with stdin from /dev/null; its stdout,
stderr and exit status are printed between marker lines::

    ::envbuild:: gpu_query out
    ...stdout...
    ::envbuild:: gpu_query err
    ...stderr...
    ::envbuild:: gpu_query rc 0

so a node's facts cost a single command, locally or over one SSH connection.
"""

from __future__ import annotations

import re
import shlex

from envbuild.facts.probe import Probe, Section

MARK = "::envbuild::"
PROBE_TIMEOUT_S = 60

_PREAMBLE = """\
set +e
export LC_ALL=C LANG=C
__eb_t=$(mktemp -d 2>/dev/null) || {{ __eb_t=/tmp/.envbuild-facts.$$; mkdir -p "$__eb_t"; }}
__eb_to() {{ if command -v timeout >/dev/null 2>&1; then timeout {timeout} "$@"; else "$@"; fi; }}
__eb_py={python}
if [ -z "$__eb_py" ]; then
  __eb_ifs=$IFS; IFS=:
  for d in $PATH; do
    case "$d" in */shims) continue;; esac
    for c in python3 python; do
      if [ -f "$d/$c" ] && [ -x "$d/$c" ]; then __eb_py="$d/$c"; break 2; fi
    done
  done
  IFS=$__eb_ifs
fi
"""

_SECTION = """\
printf '{mark} {name} out\\n'
(
{command}
) </dev/null 2>"$__eb_t/e"
__eb_rc=$?
printf '\\n{mark} {name} err\\n'
cat "$__eb_t/e" 2>/dev/null
printf '\\n{mark} {name} rc %s\\n' "$__eb_rc"
"""


def build_script(probes: list[Probe], *, python: str | None = None, timeout: int = PROBE_TIMEOUT_S) -> str:
    """The sh script running ``probes`` in order; ``python`` selects the interpreter for pip/torch."""
    names = [p.name for p in probes]
    if len(set(names)) != len(names) or not all(re.fullmatch(r"[a-z0-9_]+", n) for n in names):
        raise ValueError(f"probe names must be unique [a-z0-9_]+: {names}")
    parts = [_PREAMBLE.format(timeout=int(timeout), python=shlex.quote(python or ""))]
    parts += [_SECTION.format(mark=MARK, name=p.name, command=p.command.rstrip("\n")) for p in probes]
    parts.append('rm -rf "$__eb_t"\n')
    return "".join(parts)


_MARKER = re.compile(rf"^{re.escape(MARK)} ([a-z0-9_]+) (out|err|rc)(?: (-?\d+))?\n?$")


def split_sections(text: str) -> dict[str, Section]:
    """Split the script's stdout into ``{probe name: Section}``.

    A probe cut short (no ``rc`` marker, e.g. the connection dropped) gets rc -1.
    """
    parts: dict[str, dict] = {}
    current: tuple[str, str] | None = None
    buf: list[str] = []

    def close():
        if current is not None:
            body = "".join(buf)
            parts.setdefault(current[0], {})[current[1]] = body
    for line in text.splitlines(keepends=True):
        m = _MARKER.match(line)
        if not m:
            buf.append(line)
            continue
        name, kind, rc = m.groups()
        if current is not None:
            # the script prints one extra newline before the err and rc markers
            if buf and kind in ("err", "rc"):
                buf[-1] = buf[-1][:-1] if buf[-1].endswith("\n") else buf[-1]
            close()
        buf = []
        if kind == "rc":
            parts.setdefault(name, {})["rc"] = int(rc or -1)
            current = None
        else:
            current = (name, kind)
    if current is not None:
        close()
    return {
        name: Section(out=p.get("out", ""), err=p.get("err", ""), rc=p.get("rc", -1))
        for name, p in parts.items()
    }
