"""How far a catch-up has read: "reading train.log: 37 % of 1.2 GB, 9 s left".

`ReadProgress` is given (offset, size) readings with the time they were taken and gives the
text; the time left comes from the rate since the first reading. `StderrBar` draws it as a
bar on a terminal's stderr (`check`), redrawn at most every `every_s` and wiped at the end.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TextIO

BAR = 24


def size_text(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


class ReadProgress:
    def __init__(self, name: str) -> None:
        self.name = name
        self._first: tuple[float, int] | None = None
        self.done = 0
        self.total = 0
        self._rate = 0.0

    def update(self, done: int, total: int, now: float) -> None:
        if self._first is None:
            self._first = (now, done)
        self.done, self.total = done, max(total, done)
        start, start_done = self._first
        if now > start:
            self._rate = (done - start_done) / (now - start)

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 1.0

    def text(self) -> str:
        left = ""
        if self._rate > 0:
            left = f", {max(0.0, (self.total - self.done) / self._rate):.0f} s left"
        return (f"reading {self.name}: {self.fraction * 100:.0f} % of "
                f"{size_text(self.total)}{left}")


class StderrBar:
    """`check`'s bar: only on a terminal, so a pipe or a CI log gets no carriage returns."""

    def __init__(self, err: TextIO, name: str, clock: Callable[[], float],
                 every_s: float = 0.2) -> None:
        self.err = err
        self.progress = ReadProgress(name)
        self.clock = clock
        self.every_s = every_s
        self._drawn_at: float | None = None

    @staticmethod
    def wanted(err: TextIO) -> bool:
        try:
            return err.isatty()
        except (AttributeError, ValueError):
            return False

    def update(self, done: int, total: int) -> None:
        now = self.clock()
        self.progress.update(done, total, now)
        if self._drawn_at is not None and now - self._drawn_at < self.every_s:
            return
        self._drawn_at = now
        filled = int(self.progress.fraction * BAR)
        self.err.write(f"\r[{'#' * filled}{'.' * (BAR - filled)}] {self.progress.text()}"
                       "\x1b[K")
        self.err.flush()

    def close(self) -> None:
        if self._drawn_at is not None:
            self.err.write("\r\x1b[K")
            self.err.flush()


def file_size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
