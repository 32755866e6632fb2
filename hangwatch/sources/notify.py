"""Wake followers when something happens next to their log: a thin layer over watchdog.

Notifications are only a hint that it is worth looking now; the follower's own once-a-second
`stat` is what it trusts. So this module never reports what changed, only whom to wake, and
when notifications cannot be had (a network file system, where inotify misses writes made on
other hosts; an exhausted inotify watch or instance limit) it says why, and the follower polls.

One watcher serves many logs: it watches each parent directory once, because a single file
cannot be watched reliably (a rotated or recreated log is a different inode) and the parent
is where "the log appeared again" shows up.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from watchdog.events import (
    DirDeletedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, ObservedWatch
from watchdog.observers.polling import PollingObserver

Wake = Callable[[], None]

# File systems whose writes inotify does not see when they happen on another host.
_REMOTE_FS = frozenset(
    {
        "nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "afs", "9p", "lustre", "gpfs",
        "beegfs", "ceph", "glusterfs", "panfs", "wekafs", "orangefs", "pvfs2", "davfs", "fuse",
    }
)  # fmt: skip

_OCTAL = re.compile(r"\\([0-7]{3})")

# Only what a writer does to a file: our own open() and read() must not wake us.
_EVENTS: list[type[FileSystemEvent]] = [
    FileModifiedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    DirDeletedEvent,
    DirMovedEvent,
]


class NotWatchable(Exception):
    """Notifications cannot serve this path; the message says why. The caller polls."""


def is_remote_fs(fs_type: str) -> bool:
    # fuse.sshfs, fuse.gcsfuse, ... are remote; fuseblk is a local disk (ntfs-3g).
    return fs_type in _REMOTE_FS or fs_type.startswith("fuse.")


def mount_fs_type(path: str, mounts: str) -> str | None:
    """The file-system type of the mount holding `path` (absolute, resolved), from
    /proc/mounts text; None when no mount matches."""
    best, fs_type = "", None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = _unescape(fields[1])
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        # >=: a later mount on the same point hides the earlier one.
        if inside and len(point) >= len(best):
            best, fs_type = point, fields[2]
    return fs_type


def _unescape(field: str) -> str:
    # /proc/mounts writes space, tab, newline and backslash as octal escapes (\040 ...).
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field)


class DirectoryWatcher:
    """Watches parent directories with one watchdog observer and wakes subscribers by name.

    `mounts` and `observer_factory` are the operating system seen by this class; tests pass
    a fake mount table and an observer that fails the way a full inotify table does.
    """

    def __init__(
        self,
        *,
        mounts: Path = Path("/proc/mounts"),
        observer_factory: Callable[[], BaseObserver] = Observer,
    ) -> None:
        self._mounts = mounts
        self._factory = observer_factory
        self._lock = threading.Lock()
        self._observer: BaseObserver | None = None
        self._broken = ""  # why the observer cannot be used at all, once known
        self._watches: dict[str, tuple[ObservedWatch, tuple[int, int]]] = {}
        self._dead: set[str] = set()  # watched directories deleted since: their watch is gone
        # dir -> name -> wakes. Replaced whole on change and read without the lock: the
        # observer calls dispatch() holding its own lock, which subscribe() also takes.
        self._subs: Mapping[str, Mapping[str, frozenset[Wake]]] = {}
        self._handler = _Dispatch(self)

    def subscribe(self, path: Path, wake: Wake) -> bool:
        """Call `wake` whenever `path` may have changed.

        True when watching; False when its directory does not exist (yet): ask again later.
        Raises NotWatchable when notifications cannot serve it. Calling it again after the
        directory was deleted and recreated renews the watch.
        """
        directory, name = os.path.split(os.path.abspath(path))
        try:
            st = os.stat(directory)
            with self._lock:
                self._schedule(directory, (st.st_dev, st.st_ino))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            return False
        with self._lock:
            names = dict(self._subs.get(directory, {}))
            names[name] = names.get(name, frozenset()) | {wake}
            self._subs = {**self._subs, directory: names}
        return True

    def unsubscribe(self, path: Path, wake: Wake) -> None:
        directory, name = os.path.split(os.path.abspath(path))
        with self._lock:
            names = dict(self._subs.get(directory, {}))
            left = names.get(name, frozenset()) - {wake}
            if left:
                names[name] = left
            else:
                names.pop(name, None)
            subs = dict(self._subs)
            if names:
                subs[directory] = names
            else:
                subs.pop(directory, None)
                self._unschedule(directory)
            self._subs = subs

    def stop(self) -> None:
        """Stop the observer and its threads; the watcher cannot be used afterwards."""
        with self._lock:
            observer, self._observer = self._observer, None
            self._broken = "stopped"
            self._watches.clear()
            self._dead.clear()
            self._subs = {}
        if observer is not None:
            observer.stop()
            observer.join()

    def mark_dead(self, directory: str) -> None:
        if directory in self._watches:
            self._dead.add(directory)

    def wake(self, directory: str, name: str | None) -> None:
        names = self._subs.get(directory, {})
        wakes = [w for ws in names.values() for w in ws] if name is None else names.get(name, ())
        for wake in wakes:
            wake()

    def _schedule(self, directory: str, identity: tuple[int, int]) -> None:
        known = self._watches.get(directory)
        if known is not None and known[1] == identity and directory not in self._dead:
            return
        if known is not None:  # the directory was recreated: its old watch sees nothing
            self._unschedule(directory)
        self._dead.discard(directory)
        self._check_local(directory)
        observer = self._start_observer()
        try:
            watch = observer.schedule(self._handler, directory, event_filter=_EVENTS)
        except (FileNotFoundError, NotADirectoryError):
            raise  # gone again since the stat: the caller retries
        except OSError as e:  # ENOSPC: watch limit; EMFILE: instance limit
            raise NotWatchable(f"inotify: {e.strerror or e}") from e
        self._watches[directory] = (watch, identity)

    def _unschedule(self, directory: str) -> None:
        known = self._watches.pop(directory, None)
        if known is not None and self._observer is not None:
            self._observer.unschedule(known[0])

    def _check_local(self, directory: str) -> None:
        try:
            mounts = self._mounts.read_text(errors="replace")
        except OSError:
            return  # no mount table (not Linux): trust notifications
        fs_type = mount_fs_type(os.path.realpath(directory), mounts)
        if fs_type is not None and is_remote_fs(fs_type):
            raise NotWatchable(
                f"on a {fs_type} file system, where writes from other hosts raise no notifications"
            )

    def _start_observer(self) -> BaseObserver:
        if self._broken:
            raise NotWatchable(self._broken)
        if self._observer is None:
            try:
                observer = self._factory()
            except OSError as e:  # inotify_init: EMFILE when the instance limit is reached
                self._broken = f"inotify: {e.strerror or e}"
                raise NotWatchable(self._broken) from e
            if isinstance(observer, PollingObserver):
                observer.stop()
                self._broken = "no file-system notifications on this platform"
                raise NotWatchable(self._broken)
            observer.start()
            self._observer = observer
        return self._observer


class _Dispatch(FileSystemEventHandler):
    def __init__(self, watcher: DirectoryWatcher) -> None:
        self._watcher = watcher

    def dispatch(self, event: FileSystemEvent) -> None:
        for raw in (event.src_path, event.dest_path):
            if not raw:
                continue
            path = os.fsdecode(raw)
            if event.is_directory:  # perhaps the watched directory itself went away
                if isinstance(event, DirDeletedEvent):
                    self._watcher.mark_dead(path)
                self._watcher.wake(path, None)
            self._watcher.wake(*os.path.split(path))
