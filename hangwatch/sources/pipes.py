"""The job's stdout and stderr as a source of lines, for `hangwatch run`.

The job gets pipes, not our terminal: hangwatch sees every byte first, so a stall is judged
on exactly what the job wrote, with no file in between. Every byte is echoed as it came,
written to the job's log, and cut into lines (sources/partial.py, as the follower cuts a
file's) that go on in the order the log gets them.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import threading
from collections.abc import Callable, Mapping
from typing import IO, BinaryIO, Literal

from hangwatch.core.clock import Clock
from hangwatch.core.lines import MAX_LINE
from hangwatch.sources.partial import StreamLines

Stream = Literal["stdout", "stderr"]
Echo = Callable[[Stream, bytes], None]
READ_SIZE = 1 << 16
QUIET_LOOK_S = 0.2  # how often quiet pipes are looked at for an unfinished line now due


class JobPipes:
    """Reads the job's pipes until both close (or `abandon` is set), then closes them and
    the log. `log_error` says why the log stopped being written, if it did: a full disk
    loses the log, not the job, and the stall watch goes on."""

    def __init__(self, pipes: Mapping[Stream, IO[bytes] | None], log: BinaryIO, *, echo: Echo,
                 on_lines: Callable[[bytes], None], on_partial: Callable[[bytes], None],
                 clock: Clock) -> None:
        self._pipes = {stream: pipe for stream, pipe in pipes.items() if pipe is not None}
        self._log = log
        self._echo = echo
        self._on_lines = on_lines
        self._on_partial = on_partial
        self._lines = {stream: StreamLines(clock) for stream in self._pipes}
        self._logged = {stream: LogLines() for stream in self._pipes}
        self.log_error: str | None = None

    def read_until_closed(self, abandon: threading.Event) -> None:
        try:
            self._read(abandon)
        finally:
            for pipe in self._pipes.values():
                pipe.close()
            with contextlib.suppress(OSError):
                self._log.close()

    def _read(self, abandon: threading.Event) -> None:
        with selectors.DefaultSelector() as sel:
            for stream, pipe in self._pipes.items():
                sel.register(pipe.fileno(), selectors.EVENT_READ, stream)
            while sel.get_map() and not abandon.is_set():
                for key, _ in sel.select(timeout=QUIET_LOOK_S):
                    stream = key.data
                    data = os.read(key.fd, READ_SIZE)
                    if not data:
                        sel.unregister(key.fd)
                        self._hand_on(self._logged[stream].flush(),
                                      self._lines[stream].flush())
                        continue
                    self._echo(stream, data)
                    self._hand_on(self._logged[stream].push(data), self._lines[stream].push(data))
                for lines in self._lines.values():
                    partial = lines.take_partial()
                    if partial is not None:
                        self._on_partial(partial)

    def _hand_on(self, logged: bytes, lines: bytes) -> None:
        if logged and self.log_error is None:
            try:
                self._log.write(logged)
                self._log.flush()
            except OSError as exc:
                self.log_error = f"{self._log.name}: {exc.strerror or exc}"
        if lines:
            self._on_lines(lines)


class LogLines:
    """One stream of the job's output as its log file gets it: line ends made `\n` like the
    lines the watch reads (so line numbers agree), whole lines kept together so the two
    streams interleave by line, and nothing lost: a line longer than MAX_LINE, which the
    watch sees cut, is written whole, in pieces as it arrives, so memory stays bounded."""

    def __init__(self) -> None:
        self._held = bytearray()
        self._through = False  # writing a long line's pieces as they come
        self._pending_cr = False

    def push(self, data: bytes) -> bytes:
        """What of `data` (and of what was held) can go to the log now."""
        if self._pending_cr and data[:1] == b"\n":
            data = data[1:]  # the \n of a \r\n already written as a line end
        self._pending_cr = data.endswith(b"\r")
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        cut = data.rfind(b"\n") + 1
        done, rest = data[:cut], data[cut:]
        if done:
            self._through = False
        if self._through:
            return data
        if len(self._held) + len(rest) > MAX_LINE:
            out = b"".join((self._held, done, rest))
            self._held.clear()
            self._through = True
            return out
        out = b"".join((self._held, done))
        self._held[:] = rest
        return out

    def flush(self) -> bytes:
        """The stream ended: its last line, ended."""
        out = bytes(self._held) + b"\n" if self._held or self._through else b""
        self._held.clear()
        self._through = False
        return out

