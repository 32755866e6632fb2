"""A follower started where an earlier run stopped: the same file goes on from its offset;
a file replaced meanwhile is read from its start."""

from __future__ import annotations

import os
import queue
import time

from hangwatch.sources.feed import Block, CaughtUp, FilePos
from hangwatch.sources.follow import Follower, fingerprint


def read(path, resume, until_lines: int | None = None, timeout: float = 5.0):
    """Follow `path` from `resume` until caught up (and `until_lines` lines came)."""
    q: queue.Queue = queue.Queue()
    follower = Follower(path, q, poll=True, stat_interval=0.05, resume=resume)
    follower.start()
    items, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                items.append(q.get(timeout=0.1))
            except queue.Empty:
                continue
            got = b"".join(i.data for i in items if isinstance(i, Block)).count(b"\n")
            if any(isinstance(i, CaughtUp) for i in items) and (
                    until_lines is None or got >= until_lines):
                break
    finally:
        follower.stop()
    return items


def data(items) -> bytes:
    return b"".join(i.data for i in items if isinstance(i, Block))


def mark_after(path, items) -> FilePos:
    return [i.pos for i in items if isinstance(i, Block)][-1]


def test_block_positions_end_after_the_last_complete_line(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"first line\nsecond\npartial")
    pos = mark_after(log, read(log, None, until_lines=2))
    st = log.stat()
    assert (pos.dev, pos.ino, pos.offset) == (st.st_dev, st.st_ino, len(b"first line\nsecond\n"))
    assert pos.fingerprint == fingerprint(b"first line\n")


def test_same_file_resumes_at_its_offset_and_reads_what_was_written_meanwhile(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"one\ntwo\n")
    pos = mark_after(log, read(log, None, until_lines=2))
    with log.open("ab") as f:
        f.write(b"three\n")
    again = read(log, pos, until_lines=1)
    assert data(again) == b"three\n"
    assert mark_after(log, again).offset == log.stat().st_size


def test_file_replaced_while_down_is_read_from_its_start(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"old run\nold line\n")
    pos = mark_after(log, read(log, None, until_lines=2))
    os.unlink(log)
    log.write_bytes(b"new run\nnew line\nmore\n")  # longer than the old offset
    items = read(log, pos, until_lines=3)
    assert data(items) == b"new run\nnew line\nmore\n"
    assert any(getattr(i, "kind", "") == "replaced" for i in items)


def test_same_inode_rewritten_with_another_first_line_is_read_from_its_start(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"run 1\nline\n")
    pos = mark_after(log, read(log, None, until_lines=2))
    with log.open("r+b") as f:  # truncated and rewritten in place, longer than before
        f.truncate(0)
        f.write(b"run 2\nline\nline\n")
    assert data(read(log, pos, until_lines=3)) == b"run 2\nline\nline\n"


def test_file_shorter_than_the_offset_is_read_from_its_start(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"header\nlong line number one\n")
    pos = mark_after(log, read(log, None, until_lines=2))
    with log.open("r+b") as f:
        f.truncate(len(b"header\n"))
    assert data(read(log, pos, until_lines=1)) == b"header\n"


def test_crlf_split_at_the_saved_offset_makes_no_empty_line(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"head\r")  # the \r ends the line; its \n is still to come
    first = read(log, None, until_lines=1)
    pos = mark_after(log, first)
    assert pos.offset == 5
    with log.open("ab") as f:
        f.write(b"\nnext\r\n")
    assert data(read(log, pos, until_lines=1)) == b"next\n"
