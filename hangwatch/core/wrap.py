"""Join the rows of a record that a terminal wrapped.

A log copied from a terminal (pasted into an issue, saved from tmux or screen) holds each
screen row as a line: a record longer than the terminal is cut into rows of exactly its
width, and a rule whose words span the cut hits neither row. A source is taken as wrapped
when, among its first DETECT_ROWS rows, none is longer than a common terminal width and at
least WRAPPED_ROWS, and a third of the rows of exactly that width, run on into a shorter row
that does not begin a record (the rest of a record cut at the edge). From then on a
full-width row and the row after it are matched as one line, reported at the first row; a
row that begins a record (a timestamp, a level, a bracketed prefix) is never joined onto
the one before.
"""

from __future__ import annotations

import bisect

import regex

WIDTHS = frozenset({80, 100, 120, 132, 140, 150, 160, 180, 200, 220, 240, 250, 256, 300})
DETECT_ROWS = 2048  # rows looked at to tell whether a source is wrapped
WRAPPED_ROWS = 3  # full-width rows running on that make a source wrapped
# What begins a record rather than continuing one: a blank row, a date or clock time, a
# glog/absl level letter, a bracketed or parenthesized prefix, `host:pid:tid`, a level word,
# a traceback's lines.
RECORD_START = regex.compile(
    r"\s*$|\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d|[IWEF]\d{4} |[\[(<]|[\w.-]+:\d+:\d+ |"
    r"(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL|TRACE|NOTICE)\b|Traceback |\s+File \"")


class Unwrapper:
    """One source's rows: whether they are wrapped, learned from its first rows, and the
    blocks with wrapped rows joined. Pure: bytes in, bytes out."""

    def __init__(self) -> None:
        self.width: int | None = None  # the terminal's width, once the source looks wrapped
        self._rows = 0  # rows looked at so far (up to DETECT_ROWS)
        self._longest = 0
        self._full = 0  # rows of the longest length
        self._running_on = 0  # of those, rows followed by the rest of a record (`_tail`)

    def feed(self, data: bytes) -> tuple[bytes, list[int]]:
        """A block of whole lines, with each wrapped row joined onto the row before; and for
        each row so joined, the index (from 1) of the line it joined in the block returned,
        in order (a line wrapped twice is named twice)."""
        if self._rows < DETECT_ROWS:
            self._learn(data)
        if self.width is None:
            return data, []
        return _join(data, self.width)

    def _learn(self, data: bytes) -> None:
        wanted = DETECT_ROWS - self._rows
        # One row more than those looked at (the last one's successor), split from the front
        # only: a 1 MiB block costs what those rows weigh.
        rows = data.removesuffix(b"\n").split(b"\n", wanted + 1)[:wanted + 1]
        for i, raw in enumerate(rows[:wanted]):
            width = len(raw.decode("utf-8", "replace"))
            if width > self._longest:
                self._longest, self._full, self._running_on = width, 0, 0
            if width == self._longest:
                self._full += 1
                after = rows[i + 1] if i + 1 < len(rows) else None
                self._running_on += after is not None and _tail(after, width)
        self._rows += min(len(rows), wanted)
        wrapped = (self._longest in WIDTHS and self._running_on >= WRAPPED_ROWS
                   and 3 * self._running_on >= self._full)
        self.width = self._longest if wrapped else None


def physical(line: int, joined: list[int]) -> int:
    """The row (from 1, within the block) where line `line` of a joined block begins."""
    return line + bisect.bisect_left(joined, line)


def _join(data: bytes, width: int) -> tuple[bytes, list[int]]:
    cuts: list[int] = []  # positions of the b"\n" to drop
    rows: list[int] = []  # each one's row index (from 0) in `data`
    for found in regex.finditer(rb"(?m)^[^\n]{%d,}$" % width, data):
        end = found.end()
        if end + 1 >= len(data) or len(found.group().decode("utf-8", "replace")) != width:
            continue
        following = data[end + 1:data.find(b"\n", end + 1)]
        if not _begins_record(following):
            cuts.append(end)
            rows.append(data.count(b"\n", 0, end))
    if not cuts:
        return data, []
    pieces = [data[start + 1:end] for start, end in zip([-1, *cuts], [*cuts, len(data)],
                                                          strict=True)]
    # The line a dropped b"\n" ends up in: its row, less the rows joined before it, from 1.
    return b"".join(pieces), [row - i + 1 for i, row in enumerate(rows)]


def _tail(raw: bytes, width: int) -> bool:
    """Whether a row after a full-width one looks like the end of the record it cut: shorter
    than the terminal (rows padded to its width, as rich pads them, or the same line printed
    again and again, are no wrapping) and not the start of a record."""
    return len(raw.decode("utf-8", "replace")) < width and not _begins_record(raw)


def _begins_record(raw: bytes) -> bool:
    return RECORD_START.match(raw.decode("utf-8", "replace")) is not None
