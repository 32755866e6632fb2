"""Expand the watches' globs again and again, off the loop: a directory on a hung mount blocks
whoever lists it, and that must never be the loop."""

from __future__ import annotations

import glob
import os
import queue
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SCAN_EVERY_S = 2.0
_PUT_TICK = 0.25


@dataclass(frozen=True)
class GlobMatches:
    """The regular files `pattern` matches now, sorted."""

    pattern: str
    paths: tuple[str, ...]


def is_glob(path: str) -> bool:
    return glob.has_magic(path)


def expand(pattern: str) -> tuple[str, ...]:
    return tuple(sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p)))


class GlobScanner:
    """Puts a GlobMatches on a watch's queue for each of its globs: after `set`, then each
    time what the glob matches changes. One thread scans them all every `every` seconds."""

    def __init__(self, every: float = SCAN_EVERY_S) -> None:
        self._every = every
        self._lock = threading.Lock()
        self._wanted: dict[tuple[str, str], queue.Queue[Any]] = {}
        self._last: dict[tuple[str, str], tuple[str, ...]] = {}
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hangwatch-globs", daemon=True)

    def set(self, globs: Mapping[str, tuple[queue.Queue[Any], Sequence[str]]]) -> None:
        """watch name -> (its queue, its globs). Globs new to a watch are scanned at once."""
        wanted = {(watch, pattern): q for watch, (q, patterns) in globs.items()
                  for pattern in patterns}
        with self._lock:
            self._wanted = wanted
            self._last = {k: v for k, v in self._last.items() if k in wanted}
        self._wake.set()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 0.5) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            with self._lock:
                wanted = dict(self._wanted)
            for key, out in wanted.items():
                if self._stopping.is_set():
                    return
                paths = expand(key[1])
                with self._lock:
                    if key not in self._wanted or self._last.get(key) == paths:
                        continue
                    self._last[key] = paths
                self._put(out, GlobMatches(key[1], paths))
            self._wake.wait(self._every)

    def _put(self, out: queue.Queue[Any], item: GlobMatches) -> None:
        while not self._stopping.is_set():
            try:
                out.put(item, timeout=_PUT_TICK)
                return
            except queue.Full:
                continue
