"""Progress of a provision on the terminal: per node, the step it is in and for how long, the
steps done out of the plan's, the Ansible task inside the step, and the tail of the node's log.

``ProgressState`` is the bookkeeping (pure: events in, state out, a clock passed in);
``ProgressDisplay`` shows it. On a terminal a rich live display sits under the finished-step
lines and ticks every quarter second; elsewhere (a pipe, a CI log, TERM=dumb) each event is
one plain line, with the step's duration and ``[done/total]`` once it ends, and nothing else.

The events (``envbuild.record.events.Event``) come from ``envbuild.execute.events.EventSink``,
which calls ``display.event(ev)`` for each step event and each transient progress event (``pending``, ``task``, ``output``) as
ansible-runner reports them, and ``display(line)`` for messages. The tail shows what each
Ansible task returned as soon as it ends (the commands a step ran, a failure's output), and,
for a local node, the build log of the running command as it grows (pip/uv output, a build's
compiler lines: ``envbuild.execute.livelog``); remote nodes' logs stay on the node. Every
string from a node (host, step, task, message, log line) is shown through
``envbuild.display.visible``: a log's ESC, OSC 52 or 8-bit CSI prints as ``\\xNN``, and rich
markup in it is text (``Text``, never parsed).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from envbuild.display import visible
from envbuild.record.events import BOOKKEEPING, Event

TAIL_LINES = 8
STYLES = {"start": "cyan", "ok": "green", "changed": "yellow", "skipped": "dim", "rerun": "yellow",
          "failed": "bold red", "unreachable": "bold red", "interrupted": "bold red"}
ENDED = ("failed", "unreachable", "interrupted")


def fmt_elapsed(seconds: float) -> str:
    """``8.3 s``, ``4m12s``, ``1h02m``.

    >>> fmt_elapsed(8.34), fmt_elapsed(252), fmt_elapsed(3725)
    ('8.3 s', '4m12s', '1h02m')
    """
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"


@dataclass
class NodeProgress:
    """What one node is doing."""

    host: str
    started: float
    planned: list[str] = field(default_factory=list)  # step ids run or skipped, in order seen
    known: bool = False  # the Envbuild state task said which steps run (so ``planned`` is the whole plan)
    done: list[str] = field(default_factory=list)  # ok, changed or skipped
    step: str | None = None
    step_started: float | None = None
    task: str = ""
    status: str = "running"  # running | done | failed | unreachable | interrupted
    durations: dict[str, float] = field(default_factory=dict)
    tail: deque = field(default_factory=lambda: deque(maxlen=TAIL_LINES))

    @property
    def total(self) -> int | None:
        """Steps in the plan, once the Envbuild state task said which will run (None before)."""
        return len(self.planned) if self.known and self.planned else None

    def counter(self) -> str:
        """``[done/total]``; '' while the total is not known (a run in which Ansible did not
        start reports every step skipped at once)."""
        return f"[{len(self.done)}/{self.total}]" if self.total else ""


class ProgressState:
    """Step events -> per-node progress (no I/O; ``clock`` for tests)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.started = clock()
        self.nodes: dict[str, NodeProgress] = {}
        self.last_output: str | None = None  # the node whose log moved last

    def node(self, host: str) -> NodeProgress:
        if host not in self.nodes:
            self.nodes[host] = NodeProgress(host=host, started=self.clock())
        return self.nodes[host]

    def feed(self, ev: Event) -> NodeProgress:
        n = self.node(ev.host)
        kind, step = ev.kind, ev.step
        if kind == "pending":
            n.known = True
            for sid in ev.msg.splitlines():
                if sid and sid not in n.planned:
                    n.planned.append(sid)
        elif kind == "task":
            n.task = "" if ev.msg.startswith(BOOKKEEPING) else visible(ev.msg)
        elif kind == "output":
            n.tail.extend(visible(line)[:400] for line in ev.msg.splitlines())
            self.last_output = ev.host
        elif kind == "start":
            n.step, n.step_started, n.task = step, ev.ts, ""
            if step and step not in n.planned:
                n.planned.append(step)
        elif kind in ("ok", "changed", "skipped"):
            if step and step not in n.planned:
                n.planned.append(step)
            if step and step not in n.done:
                n.done.append(step)
            if step and kind != "skipped" and n.step == step and n.step_started is not None:
                n.durations[step] = max(0.0, ev.ts - n.step_started)
            if n.step == step:
                n.step, n.step_started, n.task = None, None, ""
            if n.total and len(n.done) >= n.total:
                n.status = "done"
        elif kind in ENDED:
            n.status = kind
            if n.step_started is not None and n.step:
                n.durations[n.step] = max(0.0, ev.ts - n.step_started)
        return n

    def line(self, ev: Event) -> Text:
        """The plain line of a step event (after ``feed``): kind, host, step, then how long the
        step took and ``[done/total]`` when it ended, the message when it failed."""
        n = self.node(ev.host)
        text = Text(f"{ev.kind:>11}", style=STYLES.get(ev.kind, ""))
        text.append(f" {visible(ev.host):<16} {visible(ev.step or '-')}")
        if ev.kind in ("ok", "changed") and ev.step in n.durations:
            text.append(f"  {fmt_elapsed(n.durations[ev.step])}", style="bold")
        if ev.kind in ("ok", "changed", "skipped") and n.counter():
            text.append(f"  {n.counter()}", style="dim")
        if ev.kind in ENDED and ev.step in n.durations:
            text.append(f"  after {fmt_elapsed(n.durations[ev.step])}")
        if ev.msg and ev.kind in (*ENDED, "rerun", "waiting"):
            text.append(f"  {visible(ev.msg)}")
        return text

    def renderable(self, width: int = 100) -> RenderableType:
        """The live view: one row per node, then the tail of the node whose log moved last."""
        now = self.clock()
        grid = Table.grid(padding=(0, 1))
        for col in ("host", "bar", "count", "step", "elapsed", "task"):
            grid.add_column(col, no_wrap=True, overflow="ellipsis",
                            max_width=None if col != "task" else max(16, width - 70))
        for n in self.nodes.values():
            running = n.status == "running"
            step = n.step or ("waiting" if running else n.status)
            elapsed = fmt_elapsed(now - n.step_started) if n.step_started is not None and running else ""
            style = {"done": "green", "running": "cyan"}.get(n.status, "bold red")
            grid.add_row(Text(visible(n.host)[:24], style="bold"),
                         ProgressBar(total=n.total or 1, completed=len(n.done) if n.total else 0,
                                     width=20 if width >= 100 else 10, pulse=n.total is None and running,
                                     complete_style="green", finished_style="green"),
                         Text(n.counter() or f"[{len(n.done)}/?]", style="dim"), Text(visible(step), style=style),
                         Text(elapsed, style="bold"),
                         Text(n.task, style="dim"))
        finished = sum(1 for n in self.nodes.values() if n.status != "running")
        head = Text(f"provision: {finished} of {len(self.nodes)} node(s) finished, "
                    f"{fmt_elapsed(now - self.started)}", style="bold")
        parts: list[RenderableType] = [head, grid]
        src = self.nodes.get(self.last_output or "")
        if src is not None and src.tail:
            parts.append(Text(f"log of {visible(src.host)}:", style="dim"))
            for line in src.tail:
                parts.append(Text("  " + line, style="dim", no_wrap=True, overflow="ellipsis"))
        return Group(*parts)


class ProgressDisplay:
    """The ``echo`` of ``envbuild.provision.provision`` on the CLI (a context manager).

    ``display(line)`` prints a message; ``display.event(ev)`` takes every event. On a terminal
    a live view (``ProgressState.renderable``) stays under the printed lines until the end.
    """

    def __init__(self, console: Console, *, live: bool | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.console = console
        self.state = ProgressState(clock)
        self.live_wanted = (console.is_terminal and not console.is_dumb_terminal) if live is None else live
        self._live: Live | None = None
        self._lock = threading.RLock()

    def __enter__(self) -> ProgressDisplay:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __call__(self, line: str) -> None:
        self.console.print(line, markup=False, highlight=False)

    # Locking: the live view renders from its own thread while holding its lock, then takes
    # ours; so we never print or start the live view while holding ours (same order: no deadlock).
    def event(self, ev: Event) -> None:
        with self._lock:
            self.state.feed(ev)
            line = None if ev.transient else self.state.line(ev)
        if line is None:
            return
        if self.live_wanted:
            self._start()
            if ev.kind != "start":  # the live view shows the step that runs
                self.console.print(line)
        else:
            self.console.print(line)

    def _render(self) -> RenderableType:
        with self._lock:
            return self.state.renderable(self.console.width)

    def _start(self) -> None:
        if self._live is None:
            self._live = Live(console=self.console, get_renderable=self._render, refresh_per_second=4,
                              transient=True, redirect_stdout=False, redirect_stderr=False)
            self._live.start()

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
