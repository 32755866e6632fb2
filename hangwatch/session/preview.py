"""Answer from the end first: where a long log is now, from its last few MB.

Attaching to a run that has logged for hours means reading all of it before the engine
knows the phase in progress. The end of the file is enough to know it in the common case:
`tail_preview` reads the last `TAIL_BYTES` (from a line's start) into an engine of its own,
with the line numbers of the whole file, and gives it to the session, which shows its place
and runs the stall clock on it while the real engine reads from the start. When that one
has caught up, its state replaces the preview's (and a stall the preview already reported
for the same place is not reported twice).

The preview declines (None) when the file is small (reading it all is as fast), when it
cannot be read, or when the tail does not anchor the place: no phase open, or none completed
before it in the tail (the phase open then may have begun long before, around what the tail
saw open).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from hangwatch.collectors.bounded import Background
from hangwatch.core.engine import Engine
from hangwatch.core.lines import LineSplitter, last_lines

MIN_BYTES = 16 << 20  # smaller files are read whole in about a second
TAIL_BYTES = 4 << 20
READ_CHUNK = 1 << 20
TAIL_LINES = 200  # kept for the incident report's log tail, as the session keeps
GENERIC = "generic"  # the pack of phases named from any log's words
WIDEN = 4  # the second try reads this many times more
WITHIN_S = 10.0  # a tail not read by then (a hung mount) is not waited for


@dataclass(frozen=True)
class Preview:
    engine: Engine
    path: str
    data: bytes  # the tail's last complete lines (TAIL_LINES at most), for the report
    end: int  # the file offset where the lines read end: later blocks are new


@dataclass(frozen=True)
class Tail:
    """Where the tail of a file begins (the start of a line), how many lines come before,
    and the file's size and mtime when it was looked at."""

    start: int
    before: int
    size: int
    mtime: float


def line_ends(data: bytes) -> int:
    """Lines ended in `data` as `LineSplitter` counts them: by \\n, \\r\\n or a lone \\r."""
    return data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")


def find_tail(fh: BinaryIO, tail_bytes: int) -> Tail:
    """The first line that starts within the last `tail_bytes` of the open file."""
    st = os.fstat(fh.fileno())
    # From the byte before the tail: it tells whether the tail begins a line.
    start = max(0, st.st_size - tail_bytes - 1)
    before = 0
    last = b""
    while fh.tell() < start:  # counting line ends runs at memory speed, far ahead of matching
        chunk = fh.read(min(READ_CHUNK, start - fh.tell()))
        if not chunk:
            break
        before += line_ends(chunk) - (last == b"\r" and chunk[:1] == b"\n")
        last = chunk[-1:]
    if start == 0:
        return Tail(0, 0, st.st_size, st.st_mtime)
    while fh.tell() < st.st_size:  # to the end of the line cut by the tail's start
        piece = fh.read(min(READ_CHUNK, st.st_size - fh.tell()))
        if last == b"\r" and piece[:1] == b"\n":
            piece = piece[1:]  # the second half of a \r\n counted already
        ends = [i for i in (piece.find(b"\n"), piece.find(b"\r")) if i >= 0]
        if ends:
            cut = min(ends) + (2 if piece[min(ends):min(ends) + 2] == b"\r\n" else 1)
            return Tail(fh.tell() - len(piece) + cut, before + 1, st.st_size, st.st_mtime)
        last = piece[-1:]
    return Tail(st.st_size, before, st.st_size, st.st_mtime)


def feed_tail(fh: BinaryIO, tail: Tail, engine: Engine, source: str) -> tuple[bytes, int]:
    """Feed the tail's complete lines to `engine` a chunk at a time (memory stays flat
    whatever its length); its last lines and the offset where the complete lines end."""
    fh.seek(tail.start)
    splitter = LineSplitter()
    kept = b""
    end = tail.start
    while fh.tell() < tail.size:
        chunk = fh.read(min(READ_CHUNK, tail.size - fh.tell()))
        if not chunk:
            break
        at = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
        if at >= 0:
            end = fh.tell() - len(chunk) + at + 1
        lines = splitter.push(chunk)
        engine.feed_block(source, lines)  # the history's events: the real engine tells them
        kept = b"".join(line + b"\n" for line in last_lines(kept + lines, TAIL_LINES))
    return kept, end


def anchored(engine: Engine) -> bool:
    """Whether the place the tail gives can be trusted without the history: a phase (or
    the finish) after one completed in the tail, and none of them generic, whose meaning
    depends on the pack phase around them (a step inside one), which may be older."""
    state = engine.state()
    named = [state["last_completed"], state["phase"], state["step"]]
    if named[0] is None or (named[1] is None and engine.finished is None):
        return False
    rules = [engine.rules.phase(p) for p in named if p is not None]
    return all(r is not None and r.origin.pack != GENERIC for r in rules)


def tail_preview(path: str, make_engine: Callable[[dict[str, int]], Engine], *,
                 min_bytes: int = MIN_BYTES, tail_bytes: int = TAIL_BYTES) -> Preview | None:
    """An engine fed the tail of `path` (made by `make_engine(lines_before)`), gone live
    with the file's age as its idle time; a tail `WIDEN` times longer when the first does
    not anchor the place; None when that one does not either."""
    try:
        size = os.stat(path).st_size
        if size < min_bytes:
            return None
        for length in (tail_bytes, tail_bytes * WIDEN):
            found = _preview(path, make_engine, length)
            if found is not None or length >= size:
                return found
    except OSError:
        pass  # the follower reports what is wrong with the file
    return None


def preview_within(path: str, make_engine: Callable[[dict[str, int]], Engine], *,
                   within_s: float = WITHIN_S) -> tuple[Preview | None, bool]:
    """`tail_preview` on a thread of its own, waited for `within_s` at most: a log on a hung
    mount blocks that thread, never the watcher (its follower says the log is stuck). The
    flag says the preview is still running: its engine may still be matching, so nothing it
    was given (a shared prefilter) may be used meanwhile."""
    work = Background(lambda: tail_preview(path, make_engine), "preview")
    preview, _ = work.result(within_s)
    return preview, not work.done()


def _preview(path: str, make_engine: Callable[[dict[str, int]], Engine],
             tail_bytes: int) -> Preview | None:
    with open(path, "rb") as fh:
        tail = find_tail(fh, tail_bytes)
        engine = make_engine({path: tail.before})
        data, end = feed_tail(fh, tail, engine, path)
    if not anchored(engine):
        return None
    age = max(0.0, engine.clock.wall() - tail.mtime)
    engine.backdate_source(path, age)
    engine.go_live()
    engine.backdate(age)
    return Preview(engine, path, data, end)
