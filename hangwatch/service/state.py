"""What a watch keeps across restarts, SIGKILL included, one JSON file per watch.

Per file: its identity (device, inode, fingerprint of the first line) and the offset after
the last line handled. Per watch: the engine's phase tracker and timeline, line counts, how
long it had been idle, the stall episode in progress with whether it was reported and
alerted, and what the watch's outputs keep (`kept`: the alerts of open episodes, and those
made but not yet safely spooled). Files are written atomically (temp file, fsync, rename)
by a thread of their own, so a slow disk never holds up the loop; a file that cannot be used
(corrupt, or written by another version) is set aside with a warning and the watch starts
afresh.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hangwatch import __version__
from hangwatch.sources.feed import FilePos
from hangwatch.storage.files import write_atomic

STATE_VERSION = 1


@dataclass
class Episode:
    """One stall of a watch, from the stall to its recovery.

    `reported`: the incident reached the outputs. `alerted`: an alert for it was delivered or
    safely queued; set by the alerts layer (WatchRuntime.mark_alerted). A restart finds a
    reported or alerted episode still stalled, and does not report or alert it again.
    """

    id: str
    started_wall: float
    phase: str | None
    reported: bool = False
    alerted: bool = False

    @classmethod
    def new(cls, watch: str, wall: float, phase: str | None) -> Episode:
        # Stable for the episode's life, restarts included: receivers dedupe on it.
        return cls(f"{watch}-{int(wall)}-{uuid.uuid4().hex[:8]}", wall, phase)


@dataclass
class WatchState:
    watch: str
    files: dict[str, FilePos]
    engine: dict[str, Any] | None = None
    episode: Episode | None = None
    saved_wall: float = 0.0
    kept: dict[str, Any] = field(default_factory=dict)  # outputs' own, by output name


# --- the file ------------------------------------------------------------------------------

def encode(state: WatchState) -> bytes:
    return json.dumps({
        "version": STATE_VERSION,
        "hangwatch": __version__,
        "watch": state.watch,
        "saved_wall": state.saved_wall,
        "files": {path: asdict(pos) for path, pos in state.files.items()},
        "engine": state.engine,
        "episode": asdict(state.episode) if state.episode is not None else None,
        "kept": state.kept,
    }, separators=(",", ":")).encode()


def decode(blob: bytes, watch: str) -> WatchState:
    """Raises ValueError saying why the file cannot be used."""
    try:
        data = json.loads(blob)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
        found = data.get("hangwatch", "?") if isinstance(data, dict) else "?"
        raise ValueError(f"written by another hangwatch ({found}, state version "
                         f"{data.get('version') if isinstance(data, dict) else '?'})")
    try:
        files = {str(p): FilePos(int(f["dev"]), int(f["ino"]), str(f["fingerprint"]),
                                 int(f["offset"])) for p, f in data["files"].items()}
        episode = Episode(**data["episode"]) if data["episode"] is not None else None
        engine = data["engine"]
        if engine is not None and not isinstance(engine, dict):
            raise TypeError("engine")
        kept = data.get("kept", {})  # absent in the files of earlier releases
        if not isinstance(kept, dict):
            raise TypeError("kept")
        return WatchState(watch, files, engine, episode, float(data["saved_wall"]), kept)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"malformed ({type(exc).__name__}: {exc})") from None


class StateStore:
    """One file a watch, `<state_dir>/<watch>.json`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, watch: str) -> Path:
        return self.folder / f"{watch}.json"

    def load(self, watch: str) -> tuple[WatchState | None, str | None]:
        """The saved state (None when there is none or it cannot be used) and a warning."""
        path = self.path(watch)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            return None, None
        except OSError as exc:
            return None, f"{path}: cannot read the saved state ({exc.strerror}); starting afresh"
        try:
            return decode(blob, watch), None
        except ValueError as why:
            aside = path.with_name(f"{path.name}.bad-{time.strftime('%Y%m%dT%H%M%S')}")
            try:
                path.rename(aside)
                where = f"set aside as {aside.name}"
            except OSError as exc:
                where = f"could not be set aside ({exc.strerror})"
            return None, f"{path}: saved state {why}; {where}; starting afresh"

    def write(self, watch: str, blob: bytes) -> None:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomic(self.path(watch), blob)


class StateWriter:
    """Writes states on a thread of its own; a newer state of a watch replaces one not yet
    written. Failures are kept in `problems` for the loop to tell."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.problems: deque[str] = deque(maxlen=100)
        self._pending: dict[str, bytes] = {}
        self._cond = threading.Condition()
        self._busy = False
        self._stopping = False
        self._failing: set[str] = set()
        self._thread = threading.Thread(target=self._run, name="hangwatch-state", daemon=True)
        self._thread.start()

    def submit(self, watch: str, blob: bytes) -> None:
        with self._cond:
            self._pending[watch] = blob
            self._cond.notify()

    def flush(self, timeout: float) -> bool:
        """Wait until everything submitted is written; False when time ran out."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def stop(self, timeout: float) -> bool:
        done = self.flush(timeout)
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(0.1)
        return done

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopping:
                    self._cond.wait()
                if not self._pending:
                    return
                watch = next(iter(self._pending))
                blob = self._pending.pop(watch)
                self._busy = True
            try:
                self._write(watch, blob)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _write(self, watch: str, blob: bytes) -> None:
        try:
            self.store.write(watch, blob)
        except OSError as exc:
            if watch not in self._failing:  # said once, not every few seconds
                self._failing.add(watch)
                self.problems.append(f"{self.store.path(watch)}: cannot save state "
                                     f"({exc.strerror or exc}); a restart would read "
                                     "the logs again")
            return
        with contextlib.suppress(KeyError):
            self._failing.remove(watch)
