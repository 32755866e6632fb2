"""An on-disk queue of alerts not yet delivered: one file per alert, in order.

Each alert is written to a temporary name, synced, renamed into place and its folder synced,
so a SIGKILL or a power cut leaves either the whole alert or none of it. Files are named by a
sequence number, and the oldest is delivered first. The folder is the state dir's, else the
user's cache folder (as for compiled prefilter databases); where neither can be written,
alerts are kept in memory, with a warning, and only an outage of the receiver is survived.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from hangwatch.storage.cache import cache_folder
from hangwatch.storage.files import write_atomic

LIMIT = 10_000  # alerts kept per target; past it the oldest go (with a warning)
_NAME = re.compile(r"^(\d{12})\.json$")
SPOOL_FOLDER = "alert-spool"


class Spool(Protocol):
    def put(self, payload: Mapping[str, Any]) -> list[Mapping[str, Any]]: ...

    def oldest(self) -> tuple[Any, Mapping[str, Any]] | None: ...

    def remove(self, handle: Any) -> None: ...

    def __len__(self) -> int: ...


class DiskSpool:
    """`put` returns the alerts dropped to stay under `limit` (none, normally)."""

    def __init__(self, folder: Path, *, limit: int = LIMIT,
                 warn: Callable[[str], None] = lambda _: None) -> None:
        self.folder = folder
        self.limit = limit
        self.warn = warn
        self._lock = threading.Lock()
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        names = self._names()
        self._next = int(names[-1][:12]) + 1 if names else 1

    def _names(self) -> list[str]:
        return sorted(n for n in os.listdir(self.folder) if _NAME.match(n))

    def put(self, payload: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        data = json.dumps(payload, ensure_ascii=False).encode()
        with self._lock:
            name = f"{self._next:012d}.json"
            self._next += 1
            write_atomic(self.folder / name, data)
            _sync_folder(self.folder)
            names = self._names()
        dropped: list[Mapping[str, Any]] = []
        for old in names[:max(0, len(names) - self.limit)]:
            loaded = self._load(old)
            self.remove(old)
            if loaded is not None:
                dropped.append(loaded)
        return dropped

    def oldest(self) -> tuple[str, Mapping[str, Any]] | None:
        for name in self._names():
            payload = self._load(name)
            if payload is not None:
                return name, payload
        return None

    def _load(self, name: str) -> Mapping[str, Any] | None:
        """A file that is not an alert (hand-edited, a foreign write) is set aside, never
        retried forever and never deleted."""
        try:
            payload = json.loads((self.folder / name).read_bytes())
            if isinstance(payload, dict) and "event" in payload:
                return payload
            problem = "not an alert"
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            problem = str(exc)
        with contextlib.suppress(OSError):
            os.replace(self.folder / name, self.folder / f"{name}.bad")
        self.warn(f"alert spool: set aside {self.folder / name} ({problem})")
        return None

    def remove(self, handle: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.folder / handle)

    def __len__(self) -> int:
        return len(self._names())


class MemorySpool:
    """The fallback when no folder can be written: same order, lost with the process."""

    def __init__(self, *, limit: int = LIMIT) -> None:
        self._items: deque[tuple[int, Mapping[str, Any]]] = deque()
        self._next = 0
        self.limit = limit
        self._lock = threading.Lock()

    def put(self, payload: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        with self._lock:
            self._items.append((self._next, payload))
            self._next += 1
            dropped = []
            while len(self._items) > self.limit:
                dropped.append(self._items.popleft()[1])
            return dropped

    def oldest(self) -> tuple[int, Mapping[str, Any]] | None:
        with self._lock:
            return self._items[0] if self._items else None

    def remove(self, handle: int) -> None:
        with self._lock:
            self._items = deque(item for item in self._items if item[0] != handle)

    def __len__(self) -> int:
        return len(self._items)


def spool_root(state_dir: str | Path | None, env: Mapping[str, str] = os.environ) -> Path | None:
    """`state_dir/alert-spool`, else the user cache folder's; None when caching is off."""
    if state_dir:
        return Path(state_dir).expanduser() / SPOOL_FOLDER
    cache = cache_folder(env)
    return cache / SPOOL_FOLDER if cache is not None else None


def open_spool(root: Path | None, key: str, warn: Callable[[str], None]) -> Spool:
    if root is not None:
        try:
            return DiskSpool(root / key, warn=warn)
        except OSError as exc:
            warn(f"alert spool: cannot use {root / key} ({exc.strerror or exc}); alerts are "
                 f"kept in memory only and lost if hangwatch is killed")
    else:
        warn("alert spool: no state dir and no cache folder; alerts are kept in memory only")
    return MemorySpool()


def _sync_folder(folder: Path) -> None:
    """Make the rename itself durable."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
