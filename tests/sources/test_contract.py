"""What every source of lines owes the engine, checked against each: the file follower (a
real file growing on disk) and the job's pipes (a real pipe). Rotation and truncation are
the follower's alone (test_follow.py)."""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hangwatch.core.clock import SystemClock
from hangwatch.sources.feed import Block, Partial
from hangwatch.sources.follow import Follower
from hangwatch.sources.pipes import JobPipes


@dataclass
class Seen:
    """What a source handed on: complete lines (as one byte string) and partial lines."""

    lines: bytearray = field(default_factory=bytearray)
    partials: list[bytes] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_lines(self, data: bytes) -> None:
        with self.lock:
            self.lines += data

    def add_partial(self, data: bytes) -> None:
        with self.lock:
            self.partials.append(data)

    def wait(self, done: Callable[[Seen], bool], timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if done(self):
                    return True
            time.sleep(0.02)
        return False


@dataclass
class Source:
    write: Callable[[bytes], None]
    seen: Seen


def _file_source(tmp_path: Path) -> Iterator[Source]:
    log = tmp_path / "train.log"
    log.write_bytes(b"")
    out: queue.Queue[object] = queue.Queue()
    follower = Follower(log, out, stat_interval=0.05)
    seen = Seen()
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set():
            try:
                item = out.get(timeout=0.05)
            except queue.Empty:
                continue
            if isinstance(item, Block):
                seen.add_lines(item.data)
            elif isinstance(item, Partial):
                seen.add_partial(item.data)

    def write(data: bytes) -> None:
        with log.open("ab") as fh:
            fh.write(data)

    follower.start()
    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    yield Source(write, seen)
    follower.stop()
    stop.set()
    reader.join(2)


def _pipe_source(tmp_path: Path) -> Iterator[Source]:
    read_fd, write_fd = os.pipe()
    seen = Seen()
    pipes = JobPipes({"stdout": os.fdopen(read_fd, "rb", buffering=0), "stderr": None},
                     (tmp_path / "job.log").open("wb"), echo=lambda _s, _d: None,
                     on_lines=seen.add_lines, on_partial=seen.add_partial, clock=SystemClock())
    abandon = threading.Event()
    reader = threading.Thread(target=pipes.read_until_closed, args=(abandon,), daemon=True)
    reader.start()
    yield Source(lambda data: os.write(write_fd, data) and None, seen)
    os.close(write_fd)
    reader.join(5)
    assert not reader.is_alive()


@pytest.fixture(params=["file", "pipe"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Source]:
    make = _file_source if request.param == "file" else _pipe_source
    yield from make(tmp_path)


def test_a_burst_of_lines_in_many_writes_arrives_whole_in_order_once(source: Source):
    lines = [f"step {i} loss {i * 0.001:.3f}\n".encode() for i in range(5000)]
    blob = b"".join(lines)
    for start in range(0, len(blob), 997):  # writes that end mid-line
        source.write(blob[start:start + 997])
    assert source.seen.wait(lambda s: len(s.lines) >= len(blob))
    assert bytes(source.seen.lines) == blob


def test_carriage_returns_end_lines_and_a_split_crlf_counts_once(source: Source):
    source.write(b"bar  10%\rbar  50%\rbar 100%\r")
    source.write(b"\nnext\r\n")
    assert source.seen.wait(lambda s: s.lines.endswith(b"next\n"))
    assert bytes(source.seen.lines) == b"bar  10%\nbar  50%\nbar 100%\nnext\n"


def test_an_unfinished_last_line_is_offered_once_then_ends_as_a_line(source: Source):
    source.write(b"start\nEpoch 1:  37%|###   | 37/100")
    assert source.seen.wait(lambda s: bool(s.partials))
    time.sleep(1.0)  # quiet on: still offered once
    assert source.seen.partials == [b"Epoch 1:  37%|###   | 37/100"]
    source.write(b"\n")
    assert source.seen.wait(lambda s: s.lines.endswith(b"37/100\n"))
    assert bytes(source.seen.lines) == b"start\nEpoch 1:  37%|###   | 37/100\n"
    assert len(source.seen.partials) == 1


def test_bytes_that_are_not_text_pass_through_untouched(source: Source):
    data = b"\xff\xfe bad utf-8 \x00 nul\n\xe2\x82\xac ok\n"
    source.write(data)
    assert source.seen.wait(lambda s: len(s.lines) >= len(data))
    assert bytes(source.seen.lines) == data
