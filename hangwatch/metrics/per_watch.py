"""One watch's numbers for Prometheus, kept up to date from the loop's thread.

A `WatchMetrics` is a Reporter (events and file notices change it) and a turn hook: the loop
calls `turned(engine)` each time it wakes, which is also how `/healthz` knows the loop is
alive. Scrapes run on the server's threads and read a consistent copy under a lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hangwatch.core.events import (
    BlindEvent,
    Event,
    Incident,
    Notice,
    PhaseEvent,
    ReadableEvent,
    RecoveredEvent,
    StallEvent,
)
from hangwatch.reporters.base import View

UNREADABLE = {"waiting", "deleted", "unreadable"}
MAX_RANKS = 64  # per-rank series of a watch: bounded cardinality, the rest summarised
READABLE = {"appeared", "replaced", "readable", "truncated"}


@dataclass(frozen=True)
class WatchSample:
    """What a scrape reports for one watch."""

    name: str
    logs: tuple[str, ...]
    seconds_since_progress: float
    stalled: bool
    phase: str | None
    phases: dict[str, float]  # phase -> duration (so far, for the one in progress)
    lines: dict[str, int]
    signals: dict[tuple[str, str], int]  # (signal, severity) -> count
    stalls: int
    readable: dict[str, bool]
    last_turn_wall: float | None
    rank_idle: dict[str, float]  # rank -> seconds since its progress, at most MAX_RANKS
    other_ranks_idle: float | None  # the most of the ranks past those
    turn_age_s: float  # seconds since the loop last turned (or since the watch was added)
    period_s: float


@dataclass
class _Phase:
    started_wall: float
    started_stamp: float | None
    duration: float | None = None


@dataclass
class _State:
    idle_s: float = 0.0
    idle_at: float | None = None  # monotonic time idle_s was read
    stalled: bool = False
    open: list[str] = field(default_factory=list)  # phases in progress, the current last
    phases: dict[str, _Phase] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    signals: dict[tuple[str, str], int] = field(default_factory=dict)
    stalls: int = 0
    readable: dict[str, bool] = field(default_factory=dict)
    turn_mono: float | None = None
    turn_wall: float | None = None
    rank_idle: dict[str, float] = field(default_factory=dict)
    other_ranks_idle: float | None = None


class WatchMetrics:
    def __init__(self, name: str, logs: Sequence[str], *, period_s: float,
                 monotonic: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.name = name
        self.logs = tuple(logs)
        self.period_s = period_s
        self._monotonic = monotonic
        self._wall = wall
        # Healthy until 3 periods pass without a first turn (catch-up starts at once).
        self._state = _State(readable=dict.fromkeys(self.logs, True), turn_mono=monotonic())
        self._lock = threading.Lock()

    # --- the loop's side ---------------------------------------------------------------

    def set_logs(self, logs: Sequence[str]) -> None:
        """The files a watch follows now (serve: globs find more as they appear)."""
        logs = tuple(logs)
        if logs == self.logs:
            return
        with self._lock:
            self.logs = logs
            for log in logs:
                self._state.readable.setdefault(log, True)

    def turned(self, engine: Any) -> None:
        """Called by the loop each time it turns: idle time, line and signal counts."""
        now = self._monotonic()
        signals = {(sid, str(r.last.severity)): r.count for sid, r in engine.signals.items()}
        ranks, others = engine.ranks.rank_idle(MAX_RANKS)
        with self._lock:
            s = self._state
            s.idle_s, s.idle_at = engine.idle(), now
            s.rank_idle, s.other_ranks_idle = ranks, others
            s.lines = dict(engine.lines)
            s.signals = signals
            s.turn_mono, s.turn_wall = now, self._wall()

    def notice(self, notice: Notice) -> None:
        if notice.kind in UNREADABLE | READABLE:
            with self._lock:
                self._state.readable[notice.path] = notice.kind in READABLE

    def event(self, event: Event) -> None:
        with self._lock:
            s = self._state
            if isinstance(event, PhaseEvent):
                self._phase(event)
            elif isinstance(event, StallEvent):
                s.stalled = True
                s.stalls += 1
            elif isinstance(event, RecoveredEvent):
                s.stalled = False
            elif isinstance(event, BlindEvent | ReadableEvent):
                s.readable[event.path] = isinstance(event, ReadableEvent)

    def _phase(self, event: PhaseEvent) -> None:
        s = self._state
        if event.state == "started":
            if event.phase not in s.open:
                s.open.append(event.phase)
            s.phases[event.phase] = _Phase(event.wall, event.stamp)
            return
        if event.phase in s.open:
            s.open.remove(event.phase)
        entry = s.phases.setdefault(event.phase, _Phase(event.wall, event.stamp))
        both = entry.started_stamp is not None and event.stamp is not None
        entry.duration = (event.stamp - entry.started_stamp if both  # type: ignore[operator]
                          else event.wall - entry.started_wall)

    def incident(self, incident: Incident) -> None:
        """The stall was counted when it fired."""

    def refresh(self, view: View) -> None:
        """Scrapes read the state; nothing to redraw."""

    def close(self) -> None:
        """The server is closed by whoever started it."""

    # --- the scrape's side -------------------------------------------------------------

    def sample(self) -> WatchSample:
        now, wall = self._monotonic(), self._wall()
        with self._lock:
            s = self._state
            since = now - s.idle_at if s.idle_at is not None else 0.0
            idle = s.idle_s + since
            phases = {p: (e.duration if e.duration is not None else wall - e.started_wall)
                      for p, e in s.phases.items()}
            return WatchSample(
                name=self.name, logs=self.logs, seconds_since_progress=max(0.0, idle),
                stalled=s.stalled, phase=s.open[-1] if s.open else None, phases=phases,
                lines=dict(s.lines), signals=dict(s.signals), stalls=s.stalls,
                readable=dict(s.readable), last_turn_wall=s.turn_wall,
                turn_age_s=now - (s.turn_mono if s.turn_mono is not None else now),
                period_s=self.period_s,
                rank_idle={r: idle_s + since for r, idle_s in s.rank_idle.items()},
                other_ranks_idle=(None if s.other_ranks_idle is None
                                  else s.other_ranks_idle + since))
