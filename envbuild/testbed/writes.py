"""Which files a command left behind, and where: strace's record of every file created.

``traced(argv, out)`` runs a command under ``strace -f`` (seccomp-filtered: only the calls that
create or open files stop the process) and ``created(text)`` reads the paths it created or
opened for writing from strace's output (pure). A test compares the paths that still exist
after the run with the folders the tool may write to (``outside``). Paths relative to a
process's working directory are not resolved (strace does not say the directory); the
``dirfd`` of ``*at`` calls is, through ``-y``.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

CALLS = ("openat", "creat", "mkdir", "mkdirat", "rename", "renameat", "renameat2", "link", "linkat",
         "symlink", "symlinkat")
WRITE_FLAGS = ("O_CREAT", "O_WRONLY", "O_RDWR")
_LINE = re.compile(r"^(\d+)\s+(\w+)\((.*?)(?:\)\s+=\s+(-?\d+).*| <unfinished \.\.\.>)$")
_RESUMED = re.compile(r"^(\d+)\s+<\.\.\. (\w+) resumed>.*\)\s+=\s+(-?\d+)")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_DIRFD = re.compile(r"(?:^|,\s*)(?:AT_FDCWD|-?\d+)(?:<([^>]*)>)?,\s*\"")


def traced(argv: list[str], out: Path) -> list[str]:
    """``argv`` run under strace, its record written to ``out``; [] when strace is missing."""
    strace = shutil.which("strace")
    if strace is None:
        return []
    return [strace, "--seccomp-bpf", "-f", "-qq", "-y", "-e", f"trace={','.join(CALLS)}",
            "-o", str(out), *argv]


def _target(call: str, args: str) -> str | None:
    """The path a call creates, or None when it creates nothing (a read-only open)."""
    if call == "openat" and (not any(flag in args for flag in WRITE_FLAGS) or "O_TMPFILE" in args):
        return None  # read-only, or an unnamed file that is gone when closed
    strings = _STRING.findall(args)
    if not strings:
        return None
    # the created path is the last path argument of rename/link/symlink, the first otherwise
    path = strings[-1] if call.startswith(("rename", "link", "symlink")) else strings[0]
    if call.endswith("at") or call == "renameat2":
        # the dirfd that goes with the created path: the last one for rename/link, else the first
        fds = [m.group(1) for m in _DIRFD.finditer(args)]
        base = (fds[-1] if call.startswith(("rename", "link")) else fds[0]) if fds else None
        if base and not path.startswith("/"):
            path = f"{base.rstrip('/')}/{path}"
    return path


def created(text: str) -> set[str]:
    """Absolute paths created, or opened for writing, by the traced processes (pure). Calls that
    failed are left out; a call strace split (``<unfinished ...>``, then ``<... resumed>``) counts
    with the result of its second half."""
    out: set[str] = set()
    pending: dict[tuple[str, str], str] = {}  # (pid, call) -> the arguments of an unfinished call
    for line in text.splitlines():
        line = line.strip()
        resumed = _RESUMED.match(line)
        if resumed:
            pid, call, rc = resumed.groups()
            args = pending.pop((pid, call), None)
            if args is None or int(rc) < 0:
                continue
        else:
            m = _LINE.match(line)
            if not m or m.group(2) not in CALLS:
                continue
            pid, call, args, rc = m.groups()
            if rc is None:
                pending[(pid, call)] = args
                continue
            if int(rc) < 0:
                continue
        path = _target(call, args)
        if path and path.startswith("/"):
            out.add(path.encode().decode("unicode_escape"))
    return out


def outside(paths: set[str], allowed: list[Path]) -> list[str]:
    """The paths of ``paths`` that still exist and lie in none of the ``allowed`` folders."""
    roots = [str(Path(a)).rstrip("/") + "/" for a in allowed]
    return sorted(p for p in paths
                  if Path(p).exists() and not any((p.rstrip("/") + "/").startswith(r) for r in roots))
