"""Signals as items on the loop's queue, so the loop wakes for them at once.

A Python signal handler runs on the main thread between two bytecodes, perhaps while that
thread holds the very queue lock a `put` would need. So the handlers do nothing; the
interpreter's wakeup fd carries each signal's number to a thread, which puts it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any


def _ignore(_signum: int, _frame: FrameType | None) -> None:
    """Only installed so the signal is caught; the wakeup fd tells the loop."""


class SignalRelay:
    """Between start() and stop() (both on the main thread), `deliver(signum)` is called on
    a thread of the relay's own for each of `signals` received."""

    def __init__(self, signals: Sequence[signal.Signals], deliver: Callable[[int], None]) -> None:
        self._signals = tuple(signals)
        self._deliver = deliver
        self._old: dict[int, Any] = {}
        self._old_fd = -1
        self._read, self._write = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(self._write, False)
        self._thread = threading.Thread(target=self._run, name="hangwatch-signals", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._old_fd = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        for sig in self._signals:
            self._old[sig] = signal.signal(sig, _ignore)

    def stop(self) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        signal.set_wakeup_fd(self._old_fd)
        os.close(self._write)  # the thread reads the end of the pipe and returns
        self._thread.join(1.0)

    def _run(self) -> None:
        try:
            while data := os.read(self._read, 64):
                for signum in data:
                    if signum in self._signals:
                        self._deliver(signum)
        finally:
            with contextlib.suppress(OSError):
                os.close(self._read)
