"""Cut a byte stream into complete lines.

Every block returned holds whole lines, each ending in a single b"\\n": `\\r\\n` and a lone
`\\r` (tqdm redraws) both end a line. A partial last line is held until its end arrives;
a line longer than `max_line` is cut with a marker and the rest of it skipped, so memory
stays bounded whatever the writer does. Splitting happens on bytes; decoding is left to
whoever reads a line, so invalid UTF-8 costs nothing here.
"""

from __future__ import annotations

MAX_LINE = 1 << 20
# Lone \r looked at one by one before searching the block for \r\n: a tqdm log has about a
# hundred a MB, and each costs a fraction of a microsecond against 1 ms for the search.
CR_PROBES = 1024
CUT_MARKER = b" [hangwatch: line cut at 1 MiB]"
# A source quiet this long with an unfinished last line gets it matched ahead of its end:
# a progress bar's last drawing ends only at the next \r, which may never come.
PARTIAL_AFTER_S = 0.7


class LineSplitter:
    def __init__(self, max_line: int = MAX_LINE) -> None:
        self._max = max_line
        # A bytearray grows in place: a long line arriving in many small reads costs
        # what it weighs, not its length squared.
        self._held = bytearray()
        self._skipping = False  # inside the remainder of a line already cut
        self._pending_cr = False  # last byte seen was \r: a \n may follow in the next read

    def push(self, data: bytes) -> bytes:
        """Take new bytes; return the complete lines they finish, normalized to \\n endings."""
        if not data:
            return b""
        if self._pending_cr and data[:1] == b"\n":
            data = data[1:]  # second half of a \r\n already counted as one line end
        self._pending_cr = data.endswith(b"\r")
        if not data:
            return b""
        if b"\r" in data:
            if _has_crlf(data):
                data = data.replace(b"\r\n", b"\n")
            data = data.replace(b"\r", b"\n")
        cut = data.rfind(b"\n")
        if cut < 0:
            self._hold(data)
            return b""
        start = 0
        head = b""
        if self._held or self._skipping:
            first = data.find(b"\n")
            if self._skipping:
                head = b"".join((self._held, CUT_MARKER, b"\n"))  # held was kept at max bytes
            else:
                head = self._complete(data[:first])
            self._held, self._skipping = bytearray(), False
            start = first + 1
        # A view, not a slice: a block is copied once, into what is returned.
        body = memoryview(data)[start : cut + 1]
        if len(body) > self._max:
            body = memoryview(self._cut_long_lines(bytes(body)))
        out = b"".join((head, body))
        self._hold(data[cut + 1 :])
        return out

    def flush(self) -> bytes:
        """End of a stream (a rotated file's last words): give the held partial line."""
        held, skipping = self._held, self._skipping
        self._held, self._skipping, self._pending_cr = bytearray(), False, False
        if skipping:
            return b"".join((held, CUT_MARKER, b"\n"))
        return b"".join((held, b"\n")) if held else b""

    @property
    def pending(self) -> int:
        """Bytes held back as an incomplete line."""
        return len(self._held)

    def partial(self) -> bytes:
        """The incomplete last line held back (empty when none, or when it is being cut)."""
        return b"" if self._skipping else bytes(self._held)

    def _hold(self, tail: bytes) -> None:
        if self._skipping or not tail:
            return
        room = self._max - len(self._held)
        if len(tail) > room:
            # Emit nothing yet: the cut line is returned when its end arrives, so line
            # numbers stay right; only the first max bytes are kept.
            self._held += tail[:room]
            self._skipping = True
        else:
            self._held += tail

    def _complete(self, rest: bytes) -> bytes:
        """The held start of a line joined to its `rest`, cut if the two exceed the limit."""
        room = self._max - len(self._held)
        if len(rest) > room:
            return b"".join((self._held, rest[:room], CUT_MARKER, b"\n"))
        return b"".join((self._held, rest, b"\n"))

    def _limit(self, line: bytes) -> bytes:
        if len(line) > self._max:
            return line[: self._max] + CUT_MARKER
        return line

    def _cut_long_lines(self, body: bytes) -> bytes:
        if len(body) <= self._max:
            return body
        parts = body.split(b"\n")
        if all(len(p) <= self._max for p in parts):
            return body
        return b"\n".join(self._limit(p) for p in parts)


def _has_crlf(data: bytes) -> bool:
    """Whether `data` holds a \r\n. Looking at the \r directly is cheaper than a two-byte
    search of the whole block, which costs about 1 ms a MB even when none is there."""
    i = data.find(b"\r")
    for _ in range(CR_PROBES):
        if i < 0:
            return False
        if data[i + 1 : i + 2] == b"\n":
            return True
        i = data.find(b"\r", i + 1)
    return b"\r\n" in data


def last_lines(data: bytes, n: int) -> list[bytes]:
    """The last `n` lines of `data` (lines ending in b"\\n"), without their line ends: one
    rsplit, however long the block."""
    parts = data.rsplit(b"\n", n + 1)
    if parts and parts[-1] == b"":
        parts.pop()
    return parts[-n:]
