from __future__ import annotations

import ctypes
import errno
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import pytest
from watchdog.observers.inotify import InotifyObserver

from hangwatch.core.lines import CUT_MARKER, MAX_LINE
from hangwatch.sources.follow import (
    Block,
    CaughtUp,
    Follower,
    FollowerGroup,
    Item,
    Notice,
    Partial,
)
from hangwatch.sources.notify import DirectoryWatcher

Until = Callable[[list[Item]], bool]


# --- helpers -------------------------------------------------------------------------------


def collect(q: queue.Queue[Item], until: Until, timeout: float = 5.0) -> list[Item]:
    """Take items until `until(items)` holds or the deadline passes; never a bare sleep."""
    items: list[Item] = []
    deadline = time.monotonic() + timeout
    while not until(items):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            items.append(q.get(timeout=left))
        except queue.Empty:
            break
    return items


def lines(items: list[Item]) -> list[bytes]:
    return b"".join(i.data for i in items if isinstance(i, Block)).split(b"\n")[:-1]


def kinds(items: list[Item]) -> list[str]:
    return [i.kind for i in items if isinstance(i, Notice)]


def has_lines(n: int) -> Until:
    return lambda items: len(lines(items)) >= n


def has_notice(kind: str) -> Until:
    return lambda items: kind in kinds(items)


def caught_up(items: list[Item]) -> bool:
    return any(isinstance(i, CaughtUp) for i in items)


def both(a: Until, b: Until) -> Until:
    return lambda items: a(items) and b(items)


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


@pytest.fixture(autouse=True)
def no_thread_left() -> Iterator[None]:
    """Fail a test that leaves a follower, observer or emitter thread running."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 3.0
    extra = [t for t in threading.enumerate() if t not in before]
    while extra and time.monotonic() < deadline:
        extra[0].join(0.05)
        extra = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert not extra, f"threads left running: {extra}"


@pytest.fixture
def follow() -> Iterator[Callable[..., tuple[Follower, queue.Queue[Item]]]]:
    started: list[Follower] = []

    def make(
        path: Path, *, start: bool = True, maxsize: int = 64, **kw: object
    ) -> tuple[Follower, queue.Queue[Item]]:
        q: queue.Queue[Item] = queue.Queue(maxsize=maxsize)
        kw.setdefault("stat_interval", 0.1)
        kw.setdefault("rotate_grace", 0.3)
        f = Follower(path, q, **kw)  # type: ignore[arg-type]
        started.append(f)
        if start:
            f.start()
        return f, q

    yield make
    for f in started:
        f.stop()


@pytest.fixture
def watchers() -> Iterator[list[DirectoryWatcher]]:
    made: list[DirectoryWatcher] = []
    yield made
    for w in made:
        w.stop()


# --- appending and catching up -------------------------------------------------------------


def test_existing_text_is_read_then_appended_lines_follow(tmp_path, follow):
    log = tmp_path / "train.log"
    log.write_bytes(b"old 1\nold 2\n")
    mtime = log.stat().st_mtime
    _, q = follow(log)
    items = collect(q, caught_up)
    assert lines(items) == [b"old 1", b"old 2"]
    assert items[-1] == CaughtUp(str(log), mtime)
    append(log, b"new 3\n")
    assert lines(collect(q, has_lines(1))) == [b"new 3"]


def test_partial_line_is_held_until_completed(tmp_path, follow):
    log = tmp_path / "train.log"
    log.write_bytes(b"step 1 loss=")
    _, q = follow(log)
    assert lines(collect(q, caught_up)) == []
    assert collect(q, has_lines(1), timeout=0.3) == []  # the half line is not given out
    append(log, b"0.25\nstep 2")
    assert lines(collect(q, has_lines(1))) == [b"step 1 loss=0.25"]


def test_missing_file_is_waited_for_then_followed(tmp_path, follow):
    log = tmp_path / "later.log"
    _, q = follow(log)
    items = collect(q, caught_up)
    assert kinds(items) == ["waiting"]
    assert items[-1] == CaughtUp(str(log), None)
    append(log, b"u1\n")
    items = collect(q, both(has_lines(1), has_notice("appeared")))
    assert kinds(items) == ["appeared"]
    assert lines(items) == [b"u1"]


def test_log_in_a_directory_not_yet_created_is_followed_once_it_appears(tmp_path, follow):
    log = tmp_path / "run" / "train.log"
    _, q = follow(log)
    assert kinds(collect(q, caught_up)) == ["waiting"]
    log.parent.mkdir()
    append(log, b"first\n")
    items = collect(q, has_lines(1))
    assert lines(items) == [b"first"]
    append(log, b"second\n")  # the directory is watched now
    assert lines(collect(q, has_lines(1))) == [b"second"]


# --- rotation, truncation, recreation ------------------------------------------------------


@contextmanager
def renamed_while_written(tmp_path, follow) -> Iterator[tuple[BinaryIO, queue.Queue[Item]]]:
    """A followed log, one line of it read, then renamed away while its writer keeps it
    open: yields that writer's file and the follower's queue."""
    log = tmp_path / "train.log"
    _, q = follow(log, rotate_grace=0.5)
    collect(q, caught_up)
    with open(log, "ab", buffering=0) as old:
        old.write(b"a1\n")
        assert lines(collect(q, has_lines(1))) == [b"a1"]
        os.rename(log, tmp_path / "train.log.1")
        yield old, q


def test_rotation_by_rename_loses_no_line_and_reads_none_twice(tmp_path, follow):
    log = tmp_path / "train.log"
    with renamed_while_written(tmp_path, follow) as (old, q):
        old.write(b"a3 written after the rename\n")
        append(log, b"b1\n")
        items = collect(q, has_notice("replaced"))
        # The follower has switched to the new file: the old one must still be drained.
        old.write(b"a4 last words without newline")
        append(log, b"b2\n")
    items += collect(q, lambda it: len(lines(items + it)) >= 4)
    items += collect(q, has_lines(1), timeout=0.5)  # anything read twice would come now
    assert sorted(lines(items)) == [
        b"a3 written after the rename",
        b"a4 last words without newline",
        b"b1",
        b"b2",
    ]
    assert kinds(items) == ["replaced"]


def test_writer_that_keeps_the_renamed_file_is_followed_until_it_goes_quiet(tmp_path, follow):
    # A job that never reopens its log goes on writing to the rotated file: those lines are
    # its progress, however long after the rename they come.
    log = tmp_path / "train.log"
    with renamed_while_written(tmp_path, follow) as (old, q):
        append(log, b"b1\n")
        items = collect(q, has_notice("replaced"))
        for i in range(20):  # 2 s of writes, four times the grace
            old.write(b"old %02d\n" % i)
            time.sleep(0.1)
    items += collect(q, lambda it: len(lines(items + it)) >= 21)
    assert sorted(lines(items)) == [b"b1", *(b"old %02d" % i for i in range(20))]


def test_log_renamed_away_and_back_is_not_read_twice(tmp_path, follow):
    log = tmp_path / "train.log"
    log.write_bytes(b"k1\n")
    _, q = follow(log, rotate_grace=1.0)
    assert lines(collect(q, has_lines(1))) == [b"k1"]
    os.rename(log, tmp_path / "train.log.tmp")
    append(tmp_path / "train.log.tmp", b"k2\n")
    assert lines(collect(q, has_lines(1))) == [b"k2"]  # drained while away
    os.rename(tmp_path / "train.log.tmp", log)
    append(log, b"k3\n")
    items = collect(q, has_lines(1))
    items += collect(q, has_lines(1), timeout=0.5)  # anything read twice would come now
    assert lines(items) == [b"k3"]
    assert kinds(items) == []


def test_copytruncate_restarts_at_the_start(tmp_path, follow):
    log = tmp_path / "train.log"
    log.write_bytes(b"== job ==\nx2\nx3\n")
    _, q = follow(log)
    assert len(lines(collect(q, has_lines(3)))) == 3
    shutil.copy(log, tmp_path / "train.log.1")
    os.truncate(log, 0)
    append(log, b"== job ==\n")  # the same first line: only the size tells
    items = collect(q, both(has_lines(1), has_notice("truncated")))
    assert lines(items) == [b"== job =="]
    assert kinds(items) == ["truncated"]


def test_truncate_and_fast_rewrite_past_the_old_size_is_read_from_the_start(tmp_path, follow):
    log = tmp_path / "train.log"
    log.write_bytes(b"first run 1\n")
    # Polling, so the rewrite is done before the follower looks again: the size never
    # appears to shrink, only the first line tells.
    _, q = follow(log, poll=True, stat_interval=0.3)
    assert lines(collect(q, has_lines(1))) == [b"first run 1"]
    with open(log, "r+b") as w:
        w.truncate(0)
        w.write(b"second run, a longer first line\nsecond run 2\n")
    items = collect(q, both(has_lines(2), has_notice("truncated")))
    assert lines(items) == [b"second run, a longer first line", b"second run 2"]
    assert kinds(items) == ["truncated"]


def test_hole_left_by_a_non_append_writer_after_copytruncate_is_skipped(tmp_path, follow):
    log = tmp_path / "train.log"
    _, q = follow(log)
    collect(q, caught_up)
    with open(log, "wb", buffering=0) as w:  # like `python train.py > train.log`
        w.write(b"p" * 99 + b"\n" * 1 + b"q" * 65436 + b"\n")
        assert len(lines(collect(q, has_lines(2)))) == 2
        os.truncate(log, 0)
        w.write(b"after rotation\n")  # lands at the old offset: zeros before it
    assert log.stat().st_size > 65536
    items = collect(q, has_lines(1))
    assert lines(items) == [b"after rotation"]


def test_delete_and_immediate_recreate_reads_the_new_file_whole(tmp_path, follow):
    log = tmp_path / "train.log"
    log.write_bytes(b"r1\n")
    _, q = follow(log)
    assert lines(collect(q, has_lines(1))) == [b"r1"]
    log.unlink()
    log.write_bytes(b"s1\ns2\n")
    items = collect(q, both(has_lines(2), has_notice("replaced")))
    assert lines(items) == [b"s1", b"s2"]


def test_deleted_then_recreated_with_the_same_inode_number_is_read_whole(tmp_path, follow):
    log = tmp_path / "train.log"
    log.write_bytes(b"r1\nr2\n")
    inode = log.stat().st_ino
    _, q = follow(log)
    assert len(lines(collect(q, has_lines(2)))) == 2
    log.unlink()
    assert kinds(collect(q, has_notice("deleted"))) == ["deleted"]
    # The follower has let go of the old file, so the file system may hand its inode
    # number to the next file; ext4 usually does. Either way the content is new.
    log.write_bytes(b"t1\n")
    same_inode = log.stat().st_ino == inode
    items = collect(q, both(has_lines(1), has_notice("appeared")))
    assert lines(items) == [b"t1"], f"same inode number: {same_inode}"


# --- bytes and lines -----------------------------------------------------------------------


def test_invalid_utf8_and_nul_bytes_pass_through_untouched(tmp_path, follow):
    log = tmp_path / "train.log"
    payload = b"bad \xff\xfe utf8 \xc3\x28 and \x00 nul \x00\x00 end"
    _, q = follow(log)
    collect(q, caught_up)
    append(log, payload + b"\n" + b"\x00\n")
    assert lines(collect(q, has_lines(2))) == [payload, b"\x00"]


def test_carriage_return_progress_bar_is_split_into_lines(tmp_path, follow):
    log = tmp_path / "train.log"
    _, q = follow(log)
    collect(q, caught_up)
    with open(log, "ab", buffering=0) as w:
        for pct in (0, 50, 100):
            w.write(f"\rrollout {pct:3d}%".encode())
        w.write(b"\r\n")
    items = collect(q, has_lines(4))
    assert lines(items) == [b"", b"rollout   0%", b"rollout  50%", b"rollout 100%"]


def test_line_over_1_mib_is_cut_with_a_marker_and_memory_stays_bounded(tmp_path, follow):
    log = tmp_path / "train.log"
    _, q = follow(log, read_size=256 << 10)
    collect(q, caught_up)
    chunk = b"L" * (256 << 10)
    tracemalloc.start()
    try:
        with open(log, "ab", buffering=0) as w:
            for _ in range(12):  # a 3 MiB line, written as a writer would, piece by piece
                w.write(chunk)
            w.write(b"\nafter\n")
        items = collect(q, has_lines(2))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert lines(items) == [b"L" * MAX_LINE + CUT_MARKER, b"after"]
    assert peak < 3 * MAX_LINE  # never the whole line in memory


def test_full_queue_holds_the_reader_back_and_nothing_is_lost(tmp_path, follow):
    log = tmp_path / "big.log"
    line = b"%07d " + b"z" * 120 + b"\n"
    with open(log, "wb") as w:
        w.write(b"".join(line % i for i in range(64_000)))  # about 8 MiB
    tracemalloc.start()
    try:
        _, q = follow(log, read_size=256 << 10, maxsize=2)
        deadline = time.monotonic() + 2.0
        while not q.full() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert q.full()
        count = 0
        last = b""
        while True:
            item = q.get(timeout=5)
            if isinstance(item, CaughtUp):
                break
            assert isinstance(item, Block)
            count += item.data.count(b"\n")
            last = item.data[-129:]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 64_000
    assert last == line % 63_999
    assert peak < 3 << 20  # a few blocks in flight, not the 8 MiB file


# --- health: unreadable, stuck, fallbacks --------------------------------------------------


def test_parent_becoming_a_file_is_unreadable_then_readable_again(tmp_path, follow):
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "train.log"
    log.write_bytes(b"v1\n")
    _, q = follow(log)
    assert lines(collect(q, has_lines(1))) == [b"v1"]
    logs.rename(tmp_path / "logs.moved")
    logs.write_bytes(b"")  # the path now runs through a file
    items = collect(q, has_notice("unreadable"))
    assert kinds(items) == ["unreadable"]
    assert "Not a directory" in items[-1].message
    logs.unlink()
    (tmp_path / "logs.moved").rename(logs)
    append(log, b"v2\n")
    items = collect(q, both(has_lines(1), has_notice("readable")))
    assert kinds(items) == ["readable"]
    assert lines(items) == [b"v2"]  # the same file again: nothing read twice


CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def start_without_permission_override(follower: Follower) -> None:
    """Start the follower in a thread that obeys file modes even as root.

    Linux capabilities belong to a thread and are copied to the threads it starts, so the
    follower (and its watcher) get permission checks while the test thread keeps root.
    """
    if os.geteuid() != 0:
        follower.start()
        return
    failure: list[str] = []

    def drop_and_start() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
        data = (_CapData * 2)()
        if libc.capget(ctypes.byref(header), data) != 0:
            failure.append(os.strerror(ctypes.get_errno()))
            return
        data[0].effective &= ~((1 << CAP_DAC_OVERRIDE) | (1 << CAP_DAC_READ_SEARCH))
        if libc.capset(ctypes.byref(header), data) != 0:
            failure.append(os.strerror(ctypes.get_errno()))
            return
        follower.start()

    t = threading.Thread(target=drop_and_start)
    t.start()
    t.join()
    if failure:
        pytest.skip(f"cannot drop CAP_DAC_OVERRIDE for the follower thread: {failure[0]}")


def test_permission_denied_is_unreadable_until_allowed(tmp_path, follow):
    log = tmp_path / "train.log"
    log.write_bytes(b"w1\n")
    log.chmod(0)
    f, q = follow(log, start=False)
    start_without_permission_override(f)
    items = collect(q, caught_up)
    assert kinds(items) == ["unreadable"]
    assert "Permission denied" in items[0].message
    assert items[-1] == CaughtUp(str(log), None)
    log.chmod(0o644)
    items = collect(q, both(has_lines(1), has_notice("readable")))
    assert lines(items) == [b"w1"]


LEASE_HOLDER = """
import fcntl, os, signal, sys, time
signal.signal(signal.SIGIO, signal.SIG_IGN)  # keep the lease when someone opens the file
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
print("held", flush=True)
time.sleep(60)
"""


@contextmanager
def open_blocked(path: Path) -> Iterator[subprocess.Popen[str]]:
    """While inside, open(path) by anyone else really blocks (a write lease is held)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", LEASE_HOLDER, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        if holder.stdout.readline() != "held\n":
            pytest.skip(f"file leases unavailable here: {holder.communicate()[1].strip()}")
        yield holder
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate()


def wait_stuck(f: Follower, seconds: float) -> None:
    deadline = time.monotonic() + 5.0
    while f.stuck_for() < seconds and time.monotonic() < deadline:
        time.sleep(0.02)


@contextmanager
def stuck_follower(tmp_path, follow, seconds: float) -> Iterator[tuple[Follower, queue.Queue]]:
    """A polling follower whose open() of its one-line log has blocked `seconds` already."""
    log = tmp_path / "train.log"
    log.write_bytes(b"z1\n")
    f, q = follow(log, start=False, poll=True)
    with open_blocked(log):
        f.start()
        wait_stuck(f, seconds)
        yield f, q


def test_follower_stuck_in_a_blocking_open_says_for_how_long(tmp_path, follow):
    with stuck_follower(tmp_path, follow, 0.3) as (f, q):
        first = f.stuck_for()
        assert first >= 0.3
        wait_stuck(f, first + 0.1)
        assert f.stuck_for() > first  # one call, still running: the figure grows
        assert q.empty()  # nothing read, nothing that looks like health
    items = collect(q, has_lines(1))
    assert lines(items) == [b"z1"]
    assert f.stuck_for() < 0.3


def test_stop_returns_while_the_follower_is_stuck(tmp_path, follow):
    with stuck_follower(tmp_path, follow, 0.1) as (f, _):
        started = time.monotonic()
        f.stop(timeout=0.2)
        assert time.monotonic() - started < 1.0


def test_network_file_system_reverts_to_polling(tmp_path, follow, watchers):
    mounts = tmp_path / "mounts"
    mounts.write_text(f"/dev/vda / ext4 rw 0 0\nserver:/export {tmp_path} nfs4 rw 0 0\n")
    watchers.append(DirectoryWatcher(mounts=mounts))
    log = tmp_path / "train.log"
    _, q = follow(log, watcher=watchers[0], stat_interval=0.05)
    items = collect(q, caught_up)
    assert kinds(items) == ["polling", "waiting"]
    assert "nfs4" in items[0].message
    append(log, b"n1\n")
    assert lines(collect(q, has_lines(1))) == [b"n1"]


class _FullWatchTable(InotifyObserver):
    def schedule(self, *args: object, **kwargs: object) -> object:
        raise OSError(errno.ENOSPC, "inotify watch limit reached")


def _no_instances_left() -> InotifyObserver:
    raise OSError(errno.EMFILE, "inotify instance limit reached")


@pytest.mark.parametrize(
    ("factory", "reason"),
    [(_FullWatchTable, "watch limit"), (_no_instances_left, "instance limit")],
)
def test_exhausted_inotify_reverts_to_polling(tmp_path, follow, watchers, factory, reason):
    watchers.append(DirectoryWatcher(observer_factory=factory))
    log = tmp_path / "train.log"
    log.write_bytes(b"e1\n")
    _, q = follow(log, watcher=watchers[0], stat_interval=0.05)
    items = collect(q, caught_up)
    assert kinds(items) == ["polling"]
    assert reason in items[0].message
    append(log, b"e2\n")
    assert lines(items + collect(q, has_lines(1))) == [b"e1", b"e2"]


# --- polling gives the same lines ----------------------------------------------------------


def test_polling_mode_gives_the_same_lines_as_notify_mode(tmp_path, follow):
    log = tmp_path / "train.log"
    log.write_bytes(b"c1\nc2 partial")
    _, notified = follow(log)
    _, polled = follow(log, poll=True, stat_interval=0.05)
    got: dict[str, list[bytes]] = {"notify": [], "poll": []}

    def step(expect: int, action: Callable[[], None] | None = None) -> None:
        if action is not None:
            action()
        for name, q in (("notify", notified), ("poll", polled)):
            got[name] += lines(collect(q, has_lines(expect)))

    step(1)
    step(2, lambda: append(log, b" done\r\nc3\n"))
    step(2, lambda: (os.rename(log, tmp_path / "train.log.1"), append(log, b"d1\nd2\n")))
    step(1, lambda: (os.truncate(log, 0), append(log, b"e1\n")))
    step(2, lambda: (log.unlink(), append(log, b"f1\rf2\n")))
    assert got["poll"] == got["notify"]
    assert got["poll"] == [b"c1", b"c2 partial done", b"c3", b"d1", b"d2", b"e1", b"f1", b"f2"]


# --- groups, threads, cost -----------------------------------------------------------------


class _RecordingWatcher(DirectoryWatcher):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def subscribe(self, path: Path, wake: Callable[[], None]) -> bool:
        self.calls.append("subscribe")
        return super().subscribe(path, wake)

    def unsubscribe(self, path: Path, wake: Callable[[], None]) -> None:
        self.calls.append("unsubscribe")
        super().unsubscribe(path, wake)


def test_chatty_log_is_read_on_a_timer_then_notified_again_when_quiet(
    tmp_path, follow, watchers, monkeypatch
):
    monkeypatch.setattr("hangwatch.sources.follow._QUIET_AFTER", 0.3)
    watcher = _RecordingWatcher()
    watchers.append(watcher)
    log = tmp_path / "train.log"
    # A look every 5 s could never deliver within the waits below: only notifications can.
    _, q = follow(log, watcher=watcher, stat_interval=5.0)
    collect(q, caught_up)
    with open(log, "ab", buffering=0) as w:
        for i in range(150):  # about 300 writes a second: every one a notification
            w.write(b"step %d\n" % i)
            time.sleep(0.003)
    assert len(lines(collect(q, has_lines(150), timeout=2.0))) == 150
    assert "unsubscribe" in watcher.calls  # went over to the timer
    assert collect(q, has_lines(1), timeout=0.6) == []  # quiet long enough to come back
    append(log, b"after the burst\n")
    assert lines(collect(q, has_lines(1), timeout=1.0)) == [b"after the burst"]
    assert watcher.calls[-1] == "subscribe"


def test_group_follows_several_logs_into_one_queue(tmp_path):
    a, b = tmp_path / "rank0.log", tmp_path / "rank1.log"
    a.write_bytes(b"a0\n")
    twice = tmp_path / "." / "rank0.log"  # the same log named twice is followed once
    out: queue.Queue[Item] = queue.Queue(maxsize=8)  # the consumer's own queue
    with FollowerGroup([a, b, twice], out=out, stat_interval=0.1) as group:
        assert group.out is out
        items = collect(group.out, lambda it: sum(isinstance(i, CaughtUp) for i in it) == 2)
        append(a, b"a1\n")
        append(b, b"b1\n")
        items += collect(group.out, lambda it: len(lines(items + it)) >= 3)
        assert all(f.stuck_for() < 1.0 for f in group.followers)
    by_path = {
        p: b"".join(i.data for i in items if isinstance(i, Block) and i.path == str(p))
        for p in (a, b)
    }
    assert by_path == {a: b"a0\na1\n", b: b"b1\n"}


@pytest.mark.parametrize("poll", [False, True])
def test_stopped_followers_leave_no_thread(tmp_path, poll):
    before = set(threading.enumerate())
    group = FollowerGroup([tmp_path / "a.log", tmp_path / "b.log"], poll=poll)
    group.start()
    alone = Follower(tmp_path / "c.log", queue.Queue(), poll=poll)
    alone.start()
    collect(group.out, lambda it: sum(isinstance(i, CaughtUp) for i in it) == 2)
    assert set(threading.enumerate()) - before
    group.stop()
    alone.stop()
    assert set(threading.enumerate()) == before


def test_a_quiet_log_costs_almost_no_cpu(tmp_path, follow):
    log = tmp_path / "train.log"
    log.write_bytes(b"q\n")
    _, q = follow(log, stat_interval=1.0)
    collect(q, caught_up)
    cpu = time.process_time()
    assert collect(q, has_lines(1), timeout=1.0) == []
    assert time.process_time() - cpu < 0.05


# --- unfinished last lines -----------------------------------------------------------------


def test_unfinished_last_line_is_offered_once_after_a_quiet_moment(tmp_path: Path, follow):
    path = tmp_path / "a.log"
    path.write_bytes(b"first\r")
    _, q = follow(path)
    with path.open("ab") as fh:
        fh.write(b"Generating train split: 0 examples [00:00, ? examples/s]")
    items = collect(q, lambda got: any(isinstance(i, Partial) for i in got))
    [partial] = [i for i in items if isinstance(i, Partial)]
    assert partial.data == b"Generating train split: 0 examples [00:00, ? examples/s]"
    assert lines(items) == [b"first"]
    again = collect(q, lambda got: False, timeout=1.5)  # quiet: nothing more to offer
    assert not any(isinstance(i, Partial) for i in again)
    with path.open("ab") as fh:
        fh.write(b"\rGenerating train split: 2048 examples [00:01, 1811.25 examples/s]\n")
    items = collect(q, lambda got: bool(lines(got)))
    assert lines(items) == [b"Generating train split: 0 examples [00:00, ? examples/s]",
                            b"Generating train split: 2048 examples [00:01, 1811.25 examples/s]"]
