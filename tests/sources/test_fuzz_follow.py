"""Property: whatever bytes a job writes, with whatever line endings, across rotations, the
follower and engine neither crash nor lose a line nor read one twice."""

from __future__ import annotations

import os
import queue
import time
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hangwatch.core.clock import FakeClock
from hangwatch.core.engine import Engine
from hangwatch.core.lines import LineSplitter
from hangwatch.packs.load import load_rule_set
from hangwatch.sources.feed import Block, CaughtUp, Notice
from hangwatch.sources.follow import Follower

RULES = load_rule_set()

# Log-like pieces and raw bytes: invalid UTF-8, NUL, escape sequences and every line ending.
PIECES = st.one_of(
    st.binary(max_size=64),
    st.sampled_from([b"\n", b"\r", b"\r\n", b"\n\r", b"\x00", b"\x1b[2J", b"\xff\xfe",
                     b"[SYNC] Starting weight synchronization", b"step 3 loss 0.1",
                     b"Traceback (most recent call last):", "日本".encode()]),
)
WRITES = st.lists(st.binary(max_size=0) | st.lists(PIECES, max_size=6).map(b"".join),
                  min_size=1, max_size=6)
FILES = st.lists(WRITES, min_size=1, max_size=3)  # one list of writes per file; then rotate


def expected_lines(contents: list[bytes]) -> Counter[bytes]:
    """The lines each file holds, cut as the follower cuts them; each file's last partial
    line counts once it ends (a rotated file's when it is retired)."""
    found: Counter[bytes] = Counter()
    for data in contents:
        splitter = LineSplitter()
        found.update((splitter.push(data) + splitter.flush()).split(b"\n")[:-1])
    return found


def drain(q: queue.Queue, items: list, until, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not until(items) and time.monotonic() < deadline:
        try:
            items.append(q.get(timeout=max(0.01, deadline - time.monotonic())))
        except queue.Empty:
            return


def read_lines(items: list) -> list[bytes]:
    return b"".join(i.data for i in items if isinstance(i, Block)).split(b"\n")[:-1]


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(files=FILES)
def test_random_bytes_and_rotations_lose_no_line_and_read_none_twice(tmp_path: Path, files):
    folder = tmp_path / f"run{time.monotonic_ns()}"
    folder.mkdir()
    log = folder / "train.log"
    log.write_bytes(b"")
    q: queue.Queue = queue.Queue(maxsize=64)
    follower = Follower(log, q, stat_interval=0.05, rotate_grace=0.15)
    follower.start()
    items: list = []
    contents: list[bytes] = []
    try:
        # A file renamed away before the follower ever opened it cannot be followed (nor by
        # tail -F): start writing once it holds the first file.
        drain(q, items, lambda it: any(isinstance(i, CaughtUp) for i in it), 5.0)
        for number, writes in enumerate(files):
            if number:  # rotate: rename away, a new file at the path, as logrotate does
                os.rename(log, folder / f"train.log.{number}")
                log.write_bytes(b"")
                seen = sum(isinstance(i, Notice) and i.kind == "replaced" for i in items)
                drain(q, items, lambda it, n=seen: sum(
                    isinstance(i, Notice) and i.kind == "replaced" for i in it) > n, 5.0)
            with log.open("ab", buffering=0) as fh:
                for data in writes:
                    fh.write(data)
            contents.append(b"".join(writes))
        with log.open("ab") as fh:
            fh.write(b"\n")  # end the live file's last line: it is not retired
        contents[-1] += b"\n"
        want = expected_lines(contents)
        total = sum(want.values())
        drain(q, items, lambda it: len(read_lines(it)) >= total, 5.0)
        drain(q, items, lambda it: False, 0.2)  # a line read twice would arrive now
    finally:
        follower.stop()
    got = read_lines(items)
    assert Counter(got) == want
    engine = Engine(RULES, default_stall=60, clock=FakeClock())
    for item in items:
        if isinstance(item, Block):
            engine.feed_block(str(log), item.data)
    assert engine.state()["lines"].get(str(log), 0) == total
