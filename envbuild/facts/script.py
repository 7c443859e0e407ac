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

from envbuild.facts.probe import TIMED_OUT, Probe, Section

MARK = "::envbuild::"
# Time bounds: one command of a probe (``__eb_to``) gets PROBE_TIMEOUT_S, a tool named in
# QUICK_TOOLS_S its own shorter bound (a healthy nvidia-smi answers in seconds; a hung driver
# never does), and the whole script SCRIPT_TIMEOUT_S. A tool that did not answer is not run
# again by a later probe (a hung nvidia-smi once held `envbuild facts` for 244 s: four calls
# of 60 s); one that ignores SIGTERM is killed KILL_AFTER_S later.
PROBE_TIMEOUT_S = 60
QUICK_TOOLS_S = {"nvidia-smi": 20}
SCRIPT_TIMEOUT_S = 180
KILL_AFTER_S = 3

_PREAMBLE = """\
set +e
export LC_ALL=C LANG=C
__eb_t=$(mktemp -d 2>/dev/null) || {{ __eb_t=/tmp/.envbuild-facts.$$; mkdir -p "$__eb_t"; }}
__eb_end=$(( $(date +%s 2>/dev/null || echo 0) + {deadline} ))
__eb_tk=
if command -v timeout >/dev/null 2>&1 && timeout -k 1 5 true >/dev/null 2>&1; then __eb_tk="-k {kill_after}"; fi
__eb_to() {{
  __eb_n=${{1##*/}}
  __eb_k=$(printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '_')
  if [ -e "$__eb_t/hung.$__eb_k" ]; then echo "$__eb_n {timed_out} earlier in this run: not run again" >&2; return 124; fi
  __eb_s={timeout}
  case "$__eb_n" in {quick}esac
  __eb_left=$(( __eb_end - $(date +%s 2>/dev/null || echo 0) ))
  if [ "$__eb_left" -le 0 ]; then echo "$__eb_n not run: the probes' {deadline} s are spent" >&2; return 124; fi
  if [ "$__eb_left" -lt "$__eb_s" ]; then __eb_s=$__eb_left; fi
  if ! command -v timeout >/dev/null 2>&1; then "$@"; return; fi
  timeout $__eb_tk "$__eb_s" "$@"; __eb_rc=$?
  if [ "$__eb_rc" -eq 124 ] || [ "$__eb_rc" -eq 137 ]; then
    : >"$__eb_t/hung.$__eb_k"; echo "$__eb_n {timed_out} in $__eb_s s: stopped" >&2
  fi
  return "$__eb_rc"
}}
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

# what one probe may print (stdout and stderr each): a node's real outputs are far below it (an
# 8-GPU `nvidia-smi -q` is about 100 KB); a probe that goes on is cut there and stops (SIGPIPE)
OUTPUT_LIMIT = 4 * 2**20
OVERSIZE = -3  # the rc of a probe whose output passed OUTPUT_LIMIT (split_sections)

# stderr goes through a FIFO to `head -c` as stdout goes through a pipe: a probe that writes
# without end on either is cut at the cap (and stopped by SIGPIPE), never a file growing on the node.
# Each probe's FIFO, stderr and status files are its own (named for it) in the script's folder,
# which the script's last line removes: nothing a probe left can be read as the next one's, and no
# `rm` or `cat` runs per probe (a node's facts were ~150 of the script's ~230 processes).
_SECTION = """\
printf '{mark} {name} out\\n'
mkfifo "$__eb_t/ef.{name}"
head -c {cap} <"$__eb_t/ef.{name}" >"$__eb_t/e.{name}" &
__eb_h=$!
{{ (
{command}
) </dev/null 2>"$__eb_t/ef.{name}"; echo $? >"$__eb_t/rc.{name}"; }} | head -c {cap}
wait "$__eb_h"
if [ -f "$__eb_t/rc.{name}" ]; then read -r __eb_rc <"$__eb_t/rc.{name}" || :; else __eb_rc=141; fi
printf '\\n{mark} {name} err\\n'
cat "$__eb_t/e.{name}" 2>/dev/null
printf '\\n{mark} {name} rc %s\\n' "$__eb_rc"
"""


def build_script(probes: list[Probe], *, python: str | None = None, timeout: int = PROBE_TIMEOUT_S,
                 deadline: int = SCRIPT_TIMEOUT_S) -> str:
    """The sh script running ``probes`` in order; ``python`` selects the interpreter for pip/torch;
    ``timeout`` bounds one command of a probe (``__eb_to``), ``deadline`` all of them."""
    names = [p.name for p in probes]
    if len(set(names)) != len(names) or not all(re.fullmatch(r"[a-z0-9_]+", n) for n in names):
        raise ValueError(f"probe names must be unique [a-z0-9_]+: {names}")
    quick = "".join(f"{shlex.quote(tool)}) __eb_s={min(int(timeout), int(s))};; " for tool, s in QUICK_TOOLS_S.items())
    parts = [_PREAMBLE.format(timeout=int(timeout), python=shlex.quote(python or ""), deadline=int(deadline),
                              kill_after=KILL_AFTER_S, quick=quick, timed_out=TIMED_OUT)]
    parts += [_SECTION.format(mark=MARK, name=p.name, command=p.command.rstrip("\n"), cap=OUTPUT_LIMIT + 1)
              for p in probes]
    parts.append('rm -rf "$__eb_t"\n')
    return "".join(parts)


_MARKER = re.compile(rf"^{re.escape(MARK)} ([a-z0-9_]+) (out|err|rc)(?: (-?\d+))?\n?$")


def split_sections(text: str) -> dict[str, Section]:
    """Split the script's stdout into ``{probe name: Section}``.

    A probe cut short (no ``rc`` marker, e.g. the connection dropped) gets rc -1; one whose output
    passed ``OUTPUT_LIMIT`` (the script cut it there) gets ``OVERSIZE`` and no output.
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
    return {name: _bounded(p.get("out", ""), p.get("err", ""), p.get("rc", -1)) for name, p in parts.items()}


def _bounded(out: str, err: str, rc: int) -> Section:
    """A section whose output passed ``OUTPUT_LIMIT`` is not believed: cut, rc ``OVERSIZE``."""
    over = [what for what, text in (("stdout", out), ("stderr", err))
            if len(text.encode("utf-8", errors="surrogateescape")) > OUTPUT_LIMIT]
    if not over:
        return Section(out=out, err=err, rc=rc)
    return Section(out="", err=f"printed more than {OUTPUT_LIMIT} bytes on {' and '.join(over)}: cut, not read",
                   rc=OVERSIZE)
