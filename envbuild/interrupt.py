"""Interrupts: SIGINT and SIGTERM stop a run, never pass for success.

Outside the Ansible phase the CLI turns SIGTERM into ``Interrupted`` (SIGINT is Python's
``KeyboardInterrupt``): the run in progress records itself as interrupted and the process exits
``128 + signal`` (130 SIGINT, 143 SIGTERM). During the Ansible phase ``StopRequest`` catches
both signals instead, so that the executor can stop ansible-playbook's whole process group
before envbuild records the step each node was in.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def exit_code(signum: int) -> int:
    """The shell's convention: 128 + the signal number (130 SIGINT, 143 SIGTERM)."""
    return 128 + signum


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


class Interrupted(BaseException):
    """A run stopped by a signal (a BaseException, like KeyboardInterrupt: no ``except
    Exception`` may swallow it)."""

    def __init__(self, signum: int):
        super().__init__(f"interrupted by {signal_name(signum)}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return exit_code(self.signum)


def signum_of(exc: BaseException) -> int | None:
    """The signal behind an interrupt exception, None for any other exception."""
    if isinstance(exc, Interrupted):
        return exc.signum
    if isinstance(exc, KeyboardInterrupt):
        return signal.SIGINT
    return None


def raise_on_sigterm() -> None:
    """SIGTERM raises ``Interrupted`` in the main thread (the CLI installs this at start)."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum: int, _frame: FrameType | None) -> None:
        raise Interrupted(signum)

    signal.signal(signal.SIGTERM, handler)


class StopRequest:
    """While active (``with StopRequest() as stop:``), the first SIGINT or SIGTERM is recorded
    instead of raising (``stop.signum``; ``stop.requested`` says whether to stop), so that the
    work in progress can be stopped and recorded; a second one raises ``Interrupted`` at once.
    A signal the process ignores (SIG_IGN, e.g. SIGINT of a background job) stays ignored.
    Outside the main thread no handler is installed; ``request()`` still works."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._event = threading.Event()
        self._saved: dict[int, Callable[[int, FrameType | None], Any] | int | signal.Handlers | None] = {}

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def request(self, signum: int = signal.SIGINT) -> None:
        if self.signum is None:
            self.signum = signum
        self._event.set()

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                previous = signal.getsignal(sig)
                if previous is signal.SIG_IGN:
                    continue
                self._saved[sig] = previous
                signal.signal(sig, self._on_signal)
        return self

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self.requested:
            raise Interrupted(self.signum or signum)
        self.request(signum)

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._saved.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._saved.clear()
