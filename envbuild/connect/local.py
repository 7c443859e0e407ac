"""Run a shell command on the controller itself (the ``local`` node).

Each command runs in its own session, so that it can be stopped whole: on a timeout, on an
interrupt in the calling thread, and by ``stop_all()`` when another thread (provision's main
thread, interrupted while the facts are read in the background) stops the run. A session is
stopped process by process (``/proc``), as ``timeout`` inside it makes its own process group.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from envbuild.connect.procfs import stats

_RUNNING: set[int] = set()  # session ids of the commands running now
_LOCK = threading.Lock()


def run_local(command: str, *, timeout: float = 300, stdin: str | None = None) -> tuple[int, str, str]:
    """``sh -c command`` (``stdin`` on its standard input; None: none); returns (rc, stdout,
    stderr). rc 124 when it timed out."""
    p = subprocess.Popen(["/bin/sh", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL, text=True,
                         start_new_session=True)
    with _LOCK:
        _RUNNING.add(p.pid)
    try:
        out, err = p.communicate(input=stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_session(p.pid)
        out, err = p.communicate()
        return 124, out or "", (err or "") + f"\ntimed out after {timeout:.0f} s"
    except BaseException:  # an interrupt in this thread: the command does not outlive it
        kill_session(p.pid)
        p.wait()
        raise
    finally:
        with _LOCK:
            _RUNNING.discard(p.pid)
    return p.returncode, out, err


def stop_all() -> None:
    """Kill every command ``run_local`` runs now (its callers get rc -9 back)."""
    with _LOCK:
        sessions = list(_RUNNING)
    for sid in sessions:
        kill_session(sid)


def kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid`` (a Linux /proc scan; elsewhere its leader only),
    scanning again until none is left alive: a process forked while the previous scan ran
    (a probe starting its next command) would otherwise survive, keep the command's output
    pipes open and leave the caller waiting for their end."""
    import time

    for _ in range(100):
        alive = {pid for pid, fields in stats().items() if int(fields[3]) == sid and fields[0] != "Z"}
        for pid in alive | ({sid} if not alive else set()):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if not alive:
            return
        time.sleep(0.01)
