"""Answer from the end first: an engine fed only a log's tail names the same place as one
that read it all (or declines), and a session that shows the preview while reading from
the start reports the same events as one that does not."""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from hangwatch.core.clock import SystemClock
from hangwatch.core.events import StallEvent
from hangwatch.core.lines import LineSplitter
from hangwatch.packs.load import load_rule_set
from hangwatch.session.engines import build_engine, prefilter_for
from hangwatch.session.preview import MIN_BYTES, feed_tail, find_tail, preview_within, tail_preview
from hangwatch.session.session import Session, SessionOptions
from hangwatch.sources.feed import Block, CaughtUp, FilePos
from tests.session.test_session import Recorder

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import steplog  # noqa: E402  (the benchmark's generator of per-step logs)

RULES = load_rule_set()
PREFILTER = prefilter_for(RULES)  # built once: every engine here shares it, as serve's do
PLACE = ("phase", "step", "last_step", "last_completed", "marker", "threshold_s",
         "threshold_from", "finished", "lines")
CORPUS = ROOT / "tests" / "corpus"
FIXTURES = sorted([*(ROOT / "tests" / "corpus").rglob("*.log"),
                   *(ROOT / "tests" / "fixtures").rglob("*.log"), ROOT / "docs" / "examples" /
                   "train.log"])


def engine(before: dict[str, int] | None = None):
    return build_engine(RULES, 600.0, clock=SystemClock(), prefilter=PREFILTER,
                        lines_before=before)


def whole(path: Path):
    e = engine()
    splitter = LineSplitter()
    e.feed_block(str(path), splitter.push(path.read_bytes()))
    return e


def place(e) -> dict:
    state = e.state()
    return {k: state[k] for k in PLACE if k != "finished"} | {"finished": e.finished is not None}


@pytest.fixture(scope="module")
def steplogs(tmp_path_factory) -> list[Path]:
    tmp = tmp_path_factory.mktemp("steps")
    logs = []
    for stop in [*steplog.STOPS, None]:
        for density in (5, 25, 200):
            log = tmp / f"{stop}-{density}.log"
            steplog.generate(log, 300_000, density=density, stop=stop, seed=density)
            logs.append(log)
    return logs


def tail_of(log: Path, tail_bytes: int) -> tuple[bytes, int, int]:
    """The tail's lines as fed, the lines before it, where its complete lines end."""
    fed: list[bytes] = []

    class Fed:
        def feed_block(self, source: str, data: bytes) -> None:
            fed.append(data)

    with log.open("rb") as fh:
        tail = find_tail(fh, tail_bytes)
        _, end = feed_tail(fh, tail, Fed(), str(log))  # type: ignore[arg-type]
    return b"".join(fed), tail.before, end


def test_tail_is_cut_at_line_starts_with_the_lines_before_counted(tmp_path: Path):
    log = tmp_path / "a.log"
    log.write_bytes(b"one\ntwo\r\nthree\rfour\nunfinished")
    assert tail_of(log, 16) == (b"four\n", 3, 20)
    assert tail_of(log, 15) == (b"four\n", 3, 20)  # begins a line
    assert tail_of(log, 14) == (b"", 4, 20)  # "four" cut: it is history
    assert tail_of(log, 100) == (b"one\ntwo\nthree\nfour\n", 0, 20)


def test_preview_of_per_step_logs_names_the_same_place_as_reading_all(steplogs):
    for log in steplogs:  # a step of the sparsest is longer than the tail: it may decline
        preview = tail_preview(str(log), engine, min_bytes=0, tail_bytes=16 << 10)
        assert preview is not None or log.name.endswith("-200.log"), log.name
        if preview is not None:
            assert place(preview.engine) == place(whole(log)), log.name


def test_preview_of_fixture_logs_names_the_same_place_or_declines():
    named = 0  # tails of the fixture logs (not the corpus's excerpts) that name a place
    for log in FIXTURES:
        size = log.stat().st_size
        for tail in (size // 3, size // 2):
            preview = tail_preview(str(log), engine, min_bytes=0, tail_bytes=max(tail, 1))
            if preview is None:
                continue
            named += CORPUS not in log.parents
            # A phase whose start line repeats without completing is named by its first
            # start, which a tail may not hold: its marker can differ then, and the session
            # reports the stall again with the whole log's marker when it has read it all.
            mine, right = place(preview.engine), place(whole(log))
            assert mine | {"marker": None} == right | {"marker": None}, (log, tail)
    # The others decline: no anchored place in the tail (the held-out excerpts, a few dozen
    # lines each, mostly decline at a third or half of their size; their number grows with
    # each batch, so the bar is set on the fixture logs alone).
    fixtures = [log for log in FIXTURES if CORPUS not in log.parents]
    assert named > len(fixtures) // 2


def session_events(log: Path, tmp_path: Path, *, with_preview: bool) -> list:
    """Feed a session the log from the start in 64 KiB blocks, as the follower does."""
    recorder = Recorder()
    preview = (tail_preview(str(log), engine, min_bytes=0, tail_bytes=64 << 10)
               if with_preview else None)
    session = Session(engine(), [recorder], SessionOptions(report_dir=tmp_path / "r"),
                      [str(log)], preview=preview)
    session.turn()
    st = log.stat()
    splitter = LineSplitter()
    with log.open("rb") as fh:
        while chunk := fh.read(64 << 10):
            session.turn(Block(str(log), splitter.push(chunk),
                               FilePos(st.st_dev, st.st_ino, "", fh.tell())))
    session.turn(CaughtUp(str(log), st.st_mtime))
    deadline = time.monotonic() + 20
    while not session.incidents and time.monotonic() < deadline:
        session.turn(session.queue.get(timeout=5))
    return [comparable(e) for e in recorder.events]


def comparable(event) -> object:
    if isinstance(event, StallEvent):  # when it fired and its idle time differ by a moment
        return ("stall", event.phase, event.step, event.last_step, event.last_completed,
                event.marker, event.threshold_s)
    return dataclasses.replace(event, wall=0.0)  # the time it was read


def test_session_with_preview_reports_the_same_events_as_reading_from_the_start(
        steplogs, tmp_path: Path):
    for log in [steplogs[1], steplogs[4], steplogs[-2]]:
        then = time.time() - 3600
        os.utime(log, (then, then))
        plain = session_events(log, tmp_path, with_preview=False)
        previewed = session_events(log, tmp_path, with_preview=True)
        stalls = [e for e in previewed if isinstance(e, tuple)]
        assert len(stalls) == 1 and previewed[0] == stalls[0], log.name  # the stall first
        assert sorted(map(repr, previewed)) == sorted(map(repr, plain)), log.name


def test_a_preview_that_blocks_is_not_waited_for_past_its_bound(tmp_path: Path):
    """The tail is read on a thread of its own: one that blocks (here in making its engine,
    as a read on a hung mount would) leaves the watcher free, and says it still runs."""
    log = tmp_path / "big.log"
    with log.open("wb") as fh:
        fh.truncate(MIN_BYTES + (1 << 20))
    release = threading.Event()

    def blocked_engine(_before):
        release.wait(30)
        raise RuntimeError("released")

    started = time.monotonic()
    try:
        preview, running = preview_within(str(log), blocked_engine, within_s=0.5)
        assert (preview, running) == (None, True)
        assert time.monotonic() - started < 5
    finally:
        release.set()

