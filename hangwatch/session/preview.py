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

from hangwatch.core.engine import Engine
from hangwatch.core.lines import LineSplitter

MIN_BYTES = 16 << 20  # smaller files are read whole in about a second
TAIL_BYTES = 4 << 20
COUNT_CHUNK = 8 << 20
GENERIC = "generic"  # the pack of phases named from any log's words
WIDEN = 4  # the second try reads this many times more


@dataclass(frozen=True)
class Preview:
    engine: Engine
    path: str
    data: bytes  # the tail's complete lines
    end: int  # the file offset where they end: later blocks are new


def line_ends(data: bytes) -> int:
    """Lines ended in `data` as `LineSplitter` counts them: by \\n, \\r\\n or a lone \\r."""
    return data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")


def read_tail(path: str, tail_bytes: int = TAIL_BYTES) -> tuple[bytes, int, int, float]:
    """The last complete lines of `path` within `tail_bytes`, starting at a line's start and
    cut as the follower cuts them; with the number of lines before them, the offset where
    they end and the file's mtime."""
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        # From the byte before the tail: it tells whether the tail begins a line.
        start = max(0, st.st_size - tail_bytes - 1)
        before = 0
        done = 0
        last = b""
        while done < start:  # counting line ends runs at memory speed, far ahead of matching
            chunk = fh.read(min(COUNT_CHUNK, start - done))
            if not chunk:
                break
            before += line_ends(chunk) - (last == b"\r" and chunk[:1] == b"\n")
            last = chunk[-1:]
            done += len(chunk)
        raw = fh.read(st.st_size - start)
    if start > 0:  # the first line, cut, belongs to the history
        if last == b"\r" and raw[:1] == b"\n":
            raw = raw[1:]  # the second half of a \r\n counted already
        ends = [i for i in (raw.find(b"\n"), raw.find(b"\r")) if i >= 0]
        if not ends:
            return b"", before, start, st.st_mtime
        cut = min(ends) + (2 if raw[min(ends):min(ends) + 2] == b"\r\n" else 1)
        before += line_ends(raw[:cut])
        start += (st.st_size - start - len(raw)) + cut
        raw = raw[cut:]
    end = max(raw.rfind(b"\n"), raw.rfind(b"\r")) + 1  # an unfinished last line: later
    return LineSplitter().push(raw[:end]), before, start + end, st.st_mtime


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


def _preview(path: str, make_engine: Callable[[dict[str, int]], Engine],
             tail_bytes: int) -> Preview | None:
    data, before, end, mtime = read_tail(path, tail_bytes)
    engine = make_engine({path: before})
    engine.feed_block(path, data)  # the history's events: the real engine tells them
    if not anchored(engine):
        return None
    age = max(0.0, engine.clock.wall() - mtime)
    engine.backdate_source(path, age)
    engine.go_live()
    engine.backdate(age)
    return Preview(engine, path, data, end)
