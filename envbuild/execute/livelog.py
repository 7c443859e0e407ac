"""A live tail of the build logs of local nodes, for the progress display.

A step's long commands (pip or uv installs, published build commands) write their output to
a log file on the node as they run (``Run.log``, ``envbuild.node.actions``). For a node that
is this machine (``connection: local``), the file is on this filesystem: ``LiveTail`` reads
what each log gained every ``interval`` seconds and hands it on as a transient ``output``
event, which the progress display shows as the tail of the node's log (only on a terminal;
never in events.jsonl or the JSON Lines stream).

Remote nodes (SSH, chroot nodes reached over SSH) are not tailed: their log is on the node
(``<prefix>/.envbuild/logs/<step>.log``) and reaching it while Ansible runs would take a
second connection per node; their progress shows each task's output when the task ends.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable

from envbuild.render.steps import step_actions as actions
from envbuild.execute.events import Event

TAIL_LINES = 8  # lines of new output per event (the display keeps as many)


def log_paths(plan) -> dict[str, str]:
    """{node path of a build log: step id} of a plan (``Run.log`` of its actions). Pure."""
    out: dict[str, str] = {}
    for step in plan.steps:
        for act in actions(step, plan.prefix):
            path = getattr(act, "log", None)
            if path:
                out.setdefault(path, step.id)
    return out


class LiveTail:
    """A thread that follows the build logs of local nodes: ``{host: {path: step id}}``.

    What a file held when the tail started is not shown (an earlier run's output); a file
    that shrank was started afresh (the step ran again) and is read from its beginning."""

    def __init__(self, logs: dict[str, dict[str, str]], emit: Callable[[Event], None], *,
                 interval: float = 0.5) -> None:
        self.logs, self.emit, self.interval = logs, emit, interval
        self._offsets: dict[str, int] = {}
        for files in logs.values():
            for path in files:
                self._offsets[path] = self._size(path)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="envbuild-livelog", daemon=True)

    @staticmethod
    def _size(path: str) -> int:
        try:
            return os.stat(path).st_size
        except OSError:
            return 0

    def poll(self) -> list[Event]:
        """Read what every log gained since the last poll; the events, also emitted."""
        out = []
        for host, files in self.logs.items():
            for path, step in files.items():
                size = self._size(path)
                start = self._offsets.get(path, 0)
                if size < start:  # truncated: the step started again
                    start = 0
                if size == start:
                    continue
                try:
                    with open(path, "rb") as fh:
                        fh.seek(start)
                        data = fh.read(size - start)
                except OSError:
                    continue
                cut = data.rfind(b"\n")  # whole lines only; the rest comes with the next poll
                if cut < 0:
                    continue
                self._offsets[path] = start + cut + 1
                lines = data[:cut].decode("utf-8", "replace").splitlines()[-TAIL_LINES:]
                text = "\n".join(line.rstrip("\r") for line in lines if line.strip())
                if text:
                    ev = Event(time.time(), host, step, "output", text)
                    out.append(ev)
                    self.emit(ev)
        return out

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - the tail is a view: it never stops a provision
                pass

    def __enter__(self) -> LiveTail:
        if self.logs:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
