"""One stream of bytes cut into lines, for every source: the file follower and the job's pipes.

Complete lines go on at once. The unfinished last line (a progress bar drawn with `\\r` and
no newline, whose last drawing may never be ended) is offered once the stream has been
quiet PARTIAL_AFTER_S, and once per line: the engine matches it ahead of its end and does
not count it again when the line ends. Both sources hold their partial lines here, so the
engine gets the same items whichever way the lines came.
"""

from __future__ import annotations

from hangwatch.core.clock import Clock
from hangwatch.core.lines import PARTIAL_AFTER_S, LineSplitter


class StreamLines:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._splitter = LineSplitter()
        self._grew_at = 0.0
        self._offered = b""  # the unfinished last line last offered

    def push(self, data: bytes) -> bytes:
        """New bytes of the stream; the complete lines they finish, `\\n`-ended."""
        self._grew_at = self._clock.monotonic()
        return self._splitter.push(data)

    def flush(self) -> bytes:
        """The stream ended (a rotated file's last words, a closed pipe): its last line."""
        self._offered = b""
        return self._splitter.flush()

    @property
    def pending(self) -> int:
        """Bytes held back as an unfinished line (not yet handed on as a line)."""
        return self._splitter.pending

    def partial_due_in(self) -> float | None:
        """Seconds until the unfinished last line is to be offered (0: now); None when there
        is none, or it was offered already."""
        partial = self._splitter.partial()
        if not partial or partial == self._offered:
            return None
        return max(0.0, self._grew_at + PARTIAL_AFTER_S - self._clock.monotonic())

    def take_partial(self) -> bytes | None:
        """The unfinished last line when it is due, once; else None."""
        if self.partial_due_in() != 0.0:
            return None
        self._offered = self._splitter.partial()
        return self._offered
