"""Follow log files by path, the way `tail -F` does, and hand complete lines to a queue.

Each Follower runs in its own thread, so a read that blocks (a stale network mount) never
blocks whoever consumes the queue; `stuck_for()` lets that consumer notice and say so.
File-system notifications only wake the thread early: what it trusts is a `stat` of the path
about once a second, compared with the file it holds open:

- another (device, inode) at the path: the log was rotated or recreated. The old file stays
  open until nothing has been added to it for `rotate_grace` seconds, because writers go on
  appending to it until they reopen the log (some never do); then its last partial line is
  flushed and it is closed. The new file is read from the start.
- the size fell below what was read: truncated (copytruncate). Read again from the start.
- the first line (up to 4 KiB of it) changed while the size did not fall: truncated and
  rewritten past the old size before anyone looked. Read again from the start.

Given `resume` (where an earlier run stopped), the first file opened is read from there when
it is still that file: the same device and inode, at least that long, and the same first line.
Otherwise it is read from the start.

After a truncation the leading NUL bytes are skipped: a writer that did not open the log
with O_APPEND (`python train.py > train.log`) keeps writing at its old offset and leaves a
hole of zeros where the old text was.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import queue
import stat
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Literal, ParamSpec, TypeVar

from hangwatch.core.clock import Clock, SystemClock
from hangwatch.core.events import Notice
from hangwatch.sources.feed import Block, CaughtUp, FilePos, Partial
from hangwatch.sources.notify import DirectoryWatcher, NotWatchable
from hangwatch.sources.partial import StreamLines

NoticeKind = Literal[
    "waiting", "appeared", "replaced", "truncated", "deleted", "unreadable", "readable", "polling"
]
Item = Block | Notice | CaughtUp | Partial

__all__ = ["Block", "CaughtUp", "Follower", "FollowerGroup", "Item", "Notice", "NoticeKind"]

HEAD_MAX = 4096  # how much of the first line identifies a file's content
_DRAIN_TICK = 0.1  # how often to look while a rotated file is still being drained
_COALESCE = 0.01  # a burst of writes raises a burst of events: let it settle, read once
# Every write to a watched log is one notification, and handling one costs about 80 us of
# CPU in watchdog: a log written thousands of times a second would eat half a core. So a
# log that wakes the follower more than _BUSY_WAKES times in a second is read on a timer
# instead, every _BUSY_TICK, until it has not grown for _QUIET_AFTER.
_BUSY_WAKES = 20
_BUSY_TICK = 0.1
_QUIET_AFTER = 2.0
_PUT_TICK = 0.25  # how often a reader blocked on a full queue checks for stop
_SEEK_DATA: int | None = getattr(os, "SEEK_DATA", None)

P = ParamSpec("P")
T = TypeVar("T")


@dataclass
class _OpenFile:
    fd: int
    dev: int
    ino: int
    seen: tuple[int, int]  # (size, mtime_ns) when last compared with the path
    lines: StreamLines  # cut into lines, with the unfinished last one
    offset: int = 0
    # The first line (up to HEAD_MAX bytes) as read: taken from the very bytes read, so a
    # rewrite between two reads cannot slip into it.
    head: bytes = b""
    head_done: bool = False  # the head holds a whole first line (or HEAD_MAX bytes)
    skip_nuls: bool = False
    drain_until: float = 0.0
    fingerprint: str = ""  # of `head`, once asked for; cleared when the head changes


def fingerprint(start: bytes) -> str:
    """What identifies a file's content across restarts: a digest of its first line, ended
    by \n or \r as the line splitter ends it (up to HEAD_MAX bytes of it). `start` is the
    file's beginning, holding at least that line."""
    ends = [i for i in (start.find(b"\n", 0, HEAD_MAX), start.find(b"\r", 0, HEAD_MAX)) if i >= 0]
    line = start[: min(ends) + 1] if ends else start[:HEAD_MAX]
    return hashlib.blake2b(line, digest_size=16).hexdigest()


class Follower:
    """Follow one log by path and put Block, Notice and CaughtUp items on `out`.

    Make `out` bounded: a full queue stops the reader, so memory stays flat on a huge log.
    `watcher` lets several followers share one notification observer; without it (and
    without `poll`) the follower makes its own. `notified_interval`: how often to look
    while notifications are on, which wake the follower on any change anyway (default:
    `stat_interval`); a service following many quiet logs looks less often.
    """

    def __init__(
        self,
        path: Path,
        out: queue.Queue[Item],
        *,
        poll: bool = False,
        stat_interval: float = 1.0,
        read_size: int = 1 << 20,
        rotate_grace: float = 2.0,
        watcher: DirectoryWatcher | None = None,
        resume: FilePos | None = None,
        notified_interval: float | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.path = Path(path)
        self._clock: Clock = SystemClock() if clock is None else clock
        self.name = str(path)
        self.out = out
        self._quoted = f"'{path}'"
        self._poll = poll
        self._interval = stat_interval
        self._notified_interval = stat_interval if notified_interval is None else notified_interval
        self._read_size = read_size
        self._grace = rotate_grace
        self._watcher = watcher
        self._owns_watcher = False
        self._subscribed = False
        self._stopping = threading.Event()
        self._woken = threading.Event()
        self._wake = self._woken.set
        self._thread: threading.Thread | None = None
        self._in_call_since = 0.0
        self._cur: _OpenFile | None = None
        self._retired: list[_OpenFile] = []
        self._state: Literal["start", "following", "vanished", "missing"] = "start"
        self._vanished_at = 0.0
        self._problem = ""  # why the log cannot be read, as last told
        self._tick_problem = ""
        self._caught_up = False
        self._chatty = False  # read on a timer, not woken by notifications
        self._wakes, self._wakes_since = 0, 0.0
        self._grew_at = 0.0
        self._resume = resume

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError(f"follower for {self.name} already started")
        if not self._poll and self._watcher is None:
            self._watcher = DirectoryWatcher()
            self._owns_watcher = True
        self._thread = threading.Thread(
            target=self._run, name=f"hangwatch-follow {self.name}", daemon=True
        )
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the thread to end, without waiting (FollowerGroup stops many at once)."""
        self._stopping.set()
        self._woken.set()

    def stop(self, timeout: float = 2.0) -> None:
        """End the thread and wait up to `timeout`; a thread stuck in a hung read is left
        behind (it is a daemon thread) rather than hanging the caller."""
        self.request_stop()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._watcher is not None:
            if self._subscribed:
                self._watcher.unsubscribe(self.path, self._wake)
                self._subscribed = False
            if self._owns_watcher:
                self._watcher.stop()

    def stuck_for(self) -> float:
        """Seconds the thread has spent inside the system call it is in now (0 when none)."""
        since = self._in_call_since
        return self._clock.monotonic() - since if since else 0.0

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                self._woken.clear()
                try:
                    self._tick()
                except Exception as e:  # a follower that died silently would look healthy
                    self._tick_problem = f"internal error: {e!r}"
                    self._settle(self._clock.monotonic())
                if self._woken.wait(self._next_wait()):
                    self._count_wake()
                    self._stopping.wait(_COALESCE)
        finally:
            for f in [self._cur, *self._retired]:
                if f is not None:
                    os.close(f.fd)
            self._cur, self._retired = None, []

    def _offer_partial(self, f: _OpenFile) -> None:
        """An unfinished last line, once the file has been quiet a moment (partial.py)."""
        partial = f.lines.take_partial()
        if partial is not None:
            self._put(Partial(self.name, partial))

    def _next_wait(self) -> float:
        due = self._cur.lines.partial_due_in() if self._cur is not None else None
        if due is not None:
            return max(0.05, min(self._interval, due))
        if self._retired or self._state == "vanished":
            return min(self._interval, _DRAIN_TICK)
        if self._chatty:
            return min(self._interval, _BUSY_TICK)
        return self._notified_interval if self._subscribed else self._interval

    def _count_wake(self) -> None:
        now = self._clock.monotonic()
        if now - self._wakes_since > 1.0:
            self._wakes, self._wakes_since = 0, now
        self._wakes += 1
        if self._wakes > _BUSY_WAKES and self._subscribed and self._watcher is not None:
            self._chatty, self._grew_at = True, now
            self._watcher.unsubscribe(self.path, self._wake)
            self._subscribed = False

    def _tick(self) -> None:
        self._tick_problem = ""
        now = self._clock.monotonic()
        self._ensure_watch()
        try:
            st: os.stat_result | None = self._call(os.stat, self.path)
            missing = False
        except OSError as e:
            st, missing = None, e.errno == errno.ENOENT
            if not missing:
                self._fail(e)
        if self._cur is not None:
            self._check_current(st, missing, now)
        self._drain_retired(now)
        if self._cur is None and st is not None:
            self._open(st)
        if self._cur is not None:
            self._read(self._cur)
            self._offer_partial(self._cur)
        self._settle(now)
        if not self._caught_up:
            self._caught_up = True
            self._put(CaughtUp(self.name, self._mtime()))

    def _ensure_watch(self) -> None:
        if self._chatty and self._clock.monotonic() - self._grew_at > _QUIET_AFTER:
            self._chatty = False
        if self._poll or self._chatty or self._subscribed or self._watcher is None:
            return
        try:
            self._subscribed = self._call(self._watcher.subscribe, self.path, self._wake)
        except NotWatchable as e:
            self._poll = True
            why = f"{self._quoted}: cannot watch for changes ({e}); reverting to polling"
            self._notice("polling", why)

    def _check_current(self, st: os.stat_result | None, missing: bool, now: float) -> None:
        cur = self._cur
        assert cur is not None
        if st is None:
            if missing:
                self._retire(cur, now)
            return  # unreadable path: keep reading the file already open
        if (st.st_dev, st.st_ino) != (cur.dev, cur.ino):
            self._retire(cur, now)
            return
        seen = (st.st_size, st.st_mtime_ns)
        if st.st_size < cur.offset:
            self._restart(cur, "file truncated")
        elif seen != cur.seen and cur.head and self._head_changed(cur):
            self._restart(cur, "file truncated and rewritten; reading it again from the start")
        cur.seen = seen

    def _retire(self, cur: _OpenFile, now: float) -> None:
        cur.drain_until = now + self._grace
        self._retired.append(cur)
        self._cur = None
        self._state, self._vanished_at = "vanished", now

    def _drain_retired(self, now: float) -> None:
        for f in list(self._retired):
            read_before = f.offset
            self._read(f)
            if f.offset != read_before:  # still written to: its writer has not reopened the log
                f.drain_until = now + self._grace
            if now >= f.drain_until:
                self._put_lines(f.lines.flush(), f)
                os.close(f.fd)
                self._retired.remove(f)

    def _open(self, st: os.stat_result) -> None:
        if not stat.S_ISREG(st.st_mode):
            self._tick_problem = self._tick_problem or "not a regular file"
            return
        for f in self._retired:
            if (f.dev, f.ino) == (st.st_dev, st.st_ino):
                # Renamed away and back: the same file, so go on where reading stopped.
                self._retired.remove(f)
                self._cur, self._state = f, "following"
                return
        try:
            fd = self._call(os.open, self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return  # gone since the stat: the next look says what happened
        except OSError as e:
            self._fail(e)
            return
        try:
            fst = self._call(os.fstat, fd)
        except OSError as e:
            os.close(fd)
            self._fail(e)
            return
        self._cur = _OpenFile(fd, fst.st_dev, fst.st_ino, seen=(fst.st_size, fst.st_mtime_ns),
                              lines=StreamLines(self._clock))
        if self._resume is not None:
            self._resume_from(self._cur, self._resume)
        if self._state == "vanished":
            self._notice("replaced", f"{self._quoted} has been replaced; following new file")
        elif self._state == "missing":
            self._notice("appeared", f"{self._quoted} has appeared; following new file")
        if self._state != "start":
            self._subscribed = False  # renews the watch if the directory was recreated too
        self._state = "following"

    def _read(self, f: _OpenFile) -> None:
        while not self._stopping.is_set():
            try:
                data = self._call(os.pread, f.fd, self._read_size, f.offset)
            except OSError as e:
                self._fail(e)
                return
            if not data:
                break
            self._grew_at = self._clock.monotonic()
            if not f.head_done and f.offset == len(f.head):
                self._extend_head(f, data)
            f.offset += len(data)
            short = len(data) < self._read_size
            if f.skip_nuls:
                data = data.lstrip(b"\0")
                f.skip_nuls = not data
            self._put_lines(f.lines.push(data), f)
            if short:
                break

    def _resume_from(self, f: _OpenFile, mark: FilePos) -> None:
        """Start reading `f` where an earlier run stopped, if it is the file that run read."""
        self._resume = None
        if mark.offset <= 0:
            return
        head = b""
        same = (f.dev, f.ino) == (mark.dev, mark.ino) and f.seen[0] >= mark.offset
        if same:
            try:
                first = self._call(os.pread, f.fd, HEAD_MAX, 0)
                end = first.find(b"\n")
                head = first[: end + 1] if end >= 0 else first
                # A \r ended the last line handled: the \n after it is not a line of its own.
                crlf = self._call(os.pread, f.fd, 2, mark.offset - 1) == b"\r\n"
            except OSError as e:
                self._fail(e)
                return
            same = fingerprint(first) == mark.fingerprint
        if not same:
            self._notice("replaced", f"{self._quoted} is not the file read before the restart; "
                                     "reading it from the start")
            return
        f.head, f.head_done, f.fingerprint = head, True, mark.fingerprint
        f.offset = mark.offset + crlf

    def _restart(self, f: _OpenFile, what: str) -> None:
        self._put_lines(f.lines.flush())
        f.offset = 0
        # Skip a hole without reading it (a non-append writer's offset can be GBs).
        # ENXIO: no data yet; EINVAL: the file system cannot tell. Both mean: from 0.
        if _SEEK_DATA is not None:
            with contextlib.suppress(OSError):
                f.offset = os.lseek(f.fd, 0, _SEEK_DATA)
        f.skip_nuls = True
        # A skipped hole reads as zeros: that is the start of this file's head.
        f.head, f.head_done = bytes(min(f.offset, HEAD_MAX)), f.offset >= HEAD_MAX
        f.fingerprint = ""
        self._notice("truncated", f"{self._quoted}: {what}")

    @staticmethod
    def _extend_head(f: _OpenFile, data: bytes) -> None:
        more = data[: HEAD_MAX - len(f.head)]
        end = more.find(b"\n")
        if end >= 0:
            more = more[: end + 1]
        f.head += more
        f.head_done = end >= 0 or len(f.head) == HEAD_MAX
        f.fingerprint = ""

    def _head_changed(self, f: _OpenFile) -> bool:
        try:
            return self._call(os.pread, f.fd, len(f.head), 0) != f.head
        except OSError as e:
            self._fail(e)
            return False

    def _settle(self, now: float) -> None:
        """Tell what changed about the log's reachability during this look."""
        if self._cur is None and not self._tick_problem:
            if self._state == "start":
                self._state, self._resume = "missing", None
                self._notice("waiting", f"{self._quoted} does not exist yet; waiting for it")
            elif self._state == "vanished" and now - self._vanished_at >= self._grace:
                self._state = "missing"
                self._notice(
                    "deleted",
                    f"{self._quoted} has disappeared (deleted or renamed); waiting for it "
                    "to reappear",
                )
        problem = self._tick_problem
        if problem != self._problem:
            if problem:
                self._notice("unreadable", f"{self._quoted} has become inaccessible: {problem}")
            elif self._cur is not None:
                self._notice("readable", f"{self._quoted} has become accessible")
            self._problem = problem

    def _mtime(self) -> float | None:
        if self._cur is None:
            return None
        try:
            return self._call(os.fstat, self._cur.fd).st_mtime
        except OSError:
            return None

    def _fail(self, error: OSError) -> None:
        # The first failure of a look is the one worth telling.
        self._tick_problem = self._tick_problem or (error.strerror or str(error))

    def _call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a call that may block (a hung mount), leaving a heartbeat for stuck_for()."""
        self._in_call_since = self._clock.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            self._in_call_since = 0.0

    def _put_lines(self, data: bytes, f: _OpenFile | None = None) -> None:
        """`f`: the file the lines were read from, whose offset tells where they end."""
        if data:
            self._put(Block(self.name, data, None if f is None else self._pos(f)))

    @staticmethod
    def _pos(f: _OpenFile) -> FilePos:
        if not f.fingerprint:
            f.fingerprint = fingerprint(f.head)
        return FilePos(f.dev, f.ino, f.fingerprint, f.offset - f.lines.pending)

    def _notice(self, kind: NoticeKind, message: str) -> None:
        self._put(Notice(self.name, kind, message))

    def _put(self, item: Item) -> None:
        while not self._stopping.is_set():
            try:
                self.out.put(item, timeout=_PUT_TICK)
                return
            except queue.Full:
                continue


def _unique(paths: Sequence[Path]) -> list[Path]:
    # The same log named twice would deliver every line twice.
    seen: set[str] = set()
    unique = []
    for p in paths:
        key = os.path.abspath(p)
        if key not in seen:
            seen.add(key)
            unique.append(Path(p))
    return unique


class FollowerGroup:
    """Follow several logs into one bounded queue, `out`, with one shared watcher.

    `out` may be the consumer's own queue; otherwise one of `max_queued` items is made.
    """

    def __init__(
        self,
        paths: Sequence[Path],
        *,
        out: queue.Queue[Item] | None = None,
        poll: bool = False,
        stat_interval: float = 1.0,
        read_size: int = 1 << 20,
        rotate_grace: float = 2.0,
        max_queued: int = 16,
        watcher: DirectoryWatcher | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.out: queue.Queue[Item] = queue.Queue(max_queued) if out is None else out
        self._owns_watcher = watcher is None and not poll
        self._watcher = DirectoryWatcher() if self._owns_watcher else watcher
        self.followers = [
            Follower(
                p,
                self.out,
                poll=poll,
                stat_interval=stat_interval,
                read_size=read_size,
                rotate_grace=rotate_grace,
                watcher=self._watcher,
                clock=clock,
            )
            for p in _unique(paths)
        ]

    def start(self) -> None:
        for f in self.followers:
            f.start()

    def stop(self, timeout: float = 2.0) -> None:
        for f in self.followers:
            f.request_stop()
        deadline = time.monotonic() + timeout  # a real bound on joining the threads
        for f in self.followers:
            f.stop(max(0.0, deadline - time.monotonic()))
        if self._owns_watcher and self._watcher is not None:
            self._watcher.stop()

    def __enter__(self) -> FollowerGroup:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
