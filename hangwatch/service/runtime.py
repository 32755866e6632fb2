"""One watch of `serve`: its engine and Session, its followers, what it cannot see, and what
it keeps across restarts. Everything here runs on the service's loop thread; the followers
and the glob scanner put onto the watch's queue, which feeds the service's one queue."""

from __future__ import annotations

import math
import queue
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hangwatch.core.clock import Clock
from hangwatch.core.durations import format_duration
from hangwatch.core.engine import Engine
from hangwatch.core.events import (
    Event,
    Incident,
    Notice,
    RecoveredEvent,
    StallEvent,
)
from hangwatch.core.history import History
from hangwatch.core.prefilter import Prefilter
from hangwatch.core.rules import RuleSet
from hangwatch.reporters.base import Reporter, View
from hangwatch.service.blind import BlindTracker, Key
from hangwatch.service.config import WatchConfig
from hangwatch.service.globs import GlobMatches, is_glob
from hangwatch.service.state import (
    Episode,
    WatchState,
    encode,
)
from hangwatch.session.engines import build_engine
from hangwatch.session.evidence import evidence_collector
from hangwatch.session.session import Session, SessionOptions, TurnHook
from hangwatch.sources.feed import Block, CaughtUp, FilePos
from hangwatch.sources.follow import Follower
from hangwatch.sources.notify import DirectoryWatcher

SAVE_EVERY_S = 2.0  # a restart re-reads at most this much of what was handled
# With notifications on, a quiet log is looked at this often (each look costs CPU, times
# the many logs of a service); polled logs (network file systems) still once a second.
NOTIFIED_LOOK_S = 5.0
_LOST = ("deleted", "unreadable")
_FOUND = ("readable", "appeared", "replaced")


class TaggedQueue(queue.Queue[Any]):
    """What a watch's producers put on: the service's one queue, each item as (watch, item)."""

    def __init__(self, shared: queue.Queue[tuple[str | None, Any]], tag: str) -> None:
        super().__init__()
        self.shared = shared
        self.tag = tag

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        self.shared.put((self.tag, item), block, timeout)


class _Health:
    """A reporter that listens for the watch itself: the episode and what cannot be seen.
    It comes first among the session's reporters, so an episode is open before any other
    output sees its stall."""

    def __init__(self, watch: WatchRuntime) -> None:
        self.watch = watch

    def notice(self, notice: Notice) -> None:
        self.watch._on_notice(notice)

    def event(self, event: Event) -> None:
        self.watch._on_event(event)

    def incident(self, incident: Incident) -> None:
        self.watch._on_incident(incident)

    def refresh(self, view: View) -> None:
        """Nothing to draw."""

    def close(self) -> None:
        """Nothing to release."""


@dataclass(frozen=True)
class Outputs:
    """What a watch's session reports to besides the watch itself, and the hooks called on
    every turn of its loop (metrics), which then turns at least every `turn_s`."""

    reporters: Sequence[Reporter]
    on_turn: Sequence[TurnHook] = ()
    turn_s: float | None = None


ReporterFactory = Callable[["WatchRuntime"], Outputs]


class WatchRuntime:
    """A watch at work. For outputs that act on its episodes (alerts): `episode` is the
    stall in progress, opened before the StallEvent reaches them; `mark_alerted` records that
    its alert is delivered or queued, which the state keeps across restarts. An output
    that keeps state of its own reads `kept[name]` (as saved before a restart) and puts a
    function in `keepers[name]` that the state's writing calls."""

    def __init__(self, config: WatchConfig, rules: RuleSet, prefilter: Prefilter | None, *,
                 shared: queue.Queue[tuple[str | None, Any]], make_reporters: ReporterFactory,
                 clock: Clock, watcher: DirectoryWatcher | None, poll: bool = False,
                 saved: WatchState | None = None) -> None:
        self.config = config
        self.name = config.name
        self.queue = TaggedQueue(shared, config.name)
        self.clock = clock
        self.blind = BlindTracker()
        self.followers: dict[str, Follower] = {}
        self.marks: dict[str, FilePos] = dict(saved.files) if saved else {}
        self.episode: Episode | None = saved.episode if saved else None
        self.kept: dict[str, Any] = dict(saved.kept) if saved else {}
        self.keepers: dict[str, Callable[[], Any]] = {}
        self._watcher = watcher
        self._poll = poll
        self._make_reporters = make_reporters
        self._origin: dict[str, str] = {}  # followed path -> the glob that found it
        self._matched: set[str] = set()  # globs that have matched a file
        self._unscanned: set[str] = set()
        self._scanned: set[str] = set()
        self._caught_up: set[str] = set()
        self._events: list[Event] = []  # made while a reporter call is under way
        self._dirty = self._urgent = False
        self._saved_at = -math.inf
        self._refire = False
        self.history = self._history()
        self.engine = self._engine(rules, prefilter)
        if saved is not None and saved.engine is not None:
            self._restore(saved)
        self.session = self._session()
        self._want(config.logs)

    # --- for outputs -----------------------------------------------------------------------

    def mark_alerted(self, episode_id: str) -> None:
        """The alert for `episode_id` is delivered or safely queued: never alert it again."""
        if self.episode is not None and self.episode.id == episode_id:
            self.episode.alerted = True
            self._urgent = True

    def save_soon(self) -> None:
        """What an output keeps changed in a way a restart must see (an alert was made)."""
        self._urgent = True

    # --- the loop's calls ------------------------------------------------------------------

    def handle(self, item: Any) -> None:
        if isinstance(item, GlobMatches):
            self._on_glob(item)
        else:
            if isinstance(item, CaughtUp):
                self._caught_up.add(item.path)
            self.session.turn(item)
            if isinstance(item, Block) and item.pos is not None:
                self.marks[item.path] = item.pos
                self._dirty = True
        self._flush_events()

    def clock_work(self) -> None:
        """What is due by the clock: the stall timer, blocked reads, blindness."""
        if self._refire and self.ready:
            self._refire_stall()
        self.session.turn(None)
        now, wall = self.clock.monotonic(), self.clock.wall()
        self._events.extend(self.blind.due(self.config.stall, now, wall, self._covered))
        self._flush_events()

    def wait_s(self) -> float | None:
        waits = [self.session.wait_s(),
                 self.blind.seconds_to_due(self.config.stall, self.clock.monotonic())]
        if self._refire:
            waits.append(0.1)
        known = [w for w in waits if w is not None]
        return min(known) if known else None

    @property
    def ready(self) -> bool:
        """Every glob expanded once and every log read up to where it was at the start."""
        return not self._unscanned and all(p in self._caught_up for p in self.followers)

    def save_due(self, now: float) -> bool:
        return self._urgent or (self._dirty and now - self._saved_at >= SAVE_EVERY_S)

    def save_in(self, now: float) -> float | None:
        if self._urgent:
            return 0.0
        return max(0.0, self._saved_at + SAVE_EVERY_S - now) if self._dirty else None

    def snapshot(self) -> bytes:
        """The state to keep, as the bytes of its file; marks the watch saved."""
        self._dirty = self._urgent = False
        self._saved_at = self.clock.monotonic()
        files = {p: m for p, m in self.marks.items() if p in self.followers or not self.ready}
        self.kept.update((name, keep()) for name, keep in self.keepers.items())
        return encode(WatchState(self.name, files, self.engine.snapshot(), self.episode,
                                 self.clock.wall(), self.kept))

    def status(self) -> str:
        state = self.engine.state()
        phase = state["phase"] or "no phase yet"
        text = f"{self.name}: {phase}, idle {format_duration(state['idle_s'])}"
        if state["finished"]:
            text = f"{self.name}: finished"
        elif state["stalled"]:
            text += " STALLED"
        blind = self.blind.blind()
        if blind:
            text += f", BLIND ({len(blind)})"
        return text

    def not_caught_up(self) -> list[str]:
        return [*sorted(self._unscanned), *(p for p in self.followers
                                            if p not in self._caught_up)]

    def reconfigure(self, config: WatchConfig, rules: RuleSet,
                    prefilter: Prefilter | None) -> None:
        """A reload: new rules and settings; the phase state, stall timer, episode and the
        followers of logs still wanted (with their offsets) go on."""
        snapshot, stalled = self.engine.snapshot(), self.engine.timer.stalled
        old = self.session
        self.config = config
        self.engine = self._engine(rules, prefilter)
        self.engine.restore(snapshot, away_s=0.0, stalled=stalled)
        self.session = self._session()
        self.session.tail = old.tail
        old.close()
        wanted = set(config.logs)
        for path in list(self.followers):
            if path not in wanted and self._origin.get(path) not in wanted:
                self._unfollow(path)
        self._unscanned &= wanted
        self._scanned &= wanted
        self._matched &= wanted
        self._want(config.logs)

    def stop_following(self) -> None:
        """Ask every follower to stop, without waiting (close() waits)."""
        for follower in self.followers.values():
            follower.request_stop()

    def close(self, deadline: float) -> None:
        """Stop following, waiting for the followers until `deadline` (monotonic) at most:
        one stuck in a hung read is left behind, a daemon thread."""
        self.stop_following()
        for follower in self.followers.values():
            follower.stop(max(0.0, deadline - time.monotonic()))
        self.session.close()

    def globs(self) -> list[str]:
        return [p for p in self.config.logs if is_glob(p)]

    # --- building --------------------------------------------------------------------------

    def _engine(self, rules: RuleSet, prefilter: Prefilter | None) -> Engine:
        return build_engine(rules, self.config.stall, clock=self.clock, prefilter=prefilter,
                            stall_given=self.config.stall_given, history=self.history)

    def _history(self) -> History:
        """The watch's learned phase durations: kept in its state file, across restarts."""
        try:
            history = History.from_dict(self.kept.get("history", {"durations": {}}))
        except ValueError:
            history = History()
            self.queue.put(Notice(self.name, "state", f"{self.name}: the learned phase "
                                  "durations in its state are damaged; learning them anew"))
        self.keepers["history"] = history.to_dict
        return history

    def _session(self) -> Session:
        collect = None
        if self.config.snapshot:
            collect = evidence_collector(self.engine.rules, self._snapshot_options)
        outputs = self._make_reporters(self)
        options = SessionOptions(report_dir=self.config.report_dir, turn_s=outputs.turn_s)
        session = Session(self.engine, [_Health(self), *outputs.reporters], options,
                          list(self.followers), collect=collect, queue_=self.queue,
                          on_turn=outputs.on_turn)
        session.watched = list(self.followers.values())
        return session

    def _snapshot_options(self) -> Any:
        from hangwatch.collectors.snapshot import SnapshotOptions

        c = self.config
        return SnapshotOptions(pids=c.pid, match=c.match, stacks=c.stacks, native=c.native,
                               log_paths=tuple(Path(p) for p in self.followers))

    def _restore(self, saved: WatchState) -> None:
        assert saved.engine is not None
        episode = saved.episode
        # An episode reported or alerted before the restart stays stalled and silent; one
        # whose report never got out is reported again once the logs are read.
        done = episode is not None and (episode.reported or episode.alerted)
        self.engine.restore(saved.engine, stalled=True,
                            away_s=self.clock.wall() - saved.saved_wall)
        self._refire = episode is not None and not done and self.engine.timer.stalled

    def _refire_stall(self) -> None:
        self._refire = False
        stall = self.engine.restate_stall() if self.episode is not None else None
        if stall is not None:
            self.session.report([stall])

    # --- following -------------------------------------------------------------------------

    def _want(self, logs: Sequence[str]) -> None:
        for path in logs:
            if is_glob(path):
                if path not in self._scanned:
                    self._unscanned.add(path)
            elif path not in self.followers:
                self._follow(path, None)

    def _follow(self, path: str, origin: str | None) -> None:
        follower = Follower(Path(path), self.queue, poll=self._poll, watcher=self._watcher,
                            resume=self.marks.get(path), notified_interval=NOTIFIED_LOOK_S)
        self.followers[path] = follower
        if origin is not None:
            self._origin[path] = origin
        self.session.sources = tuple(self.followers)
        self.session.watched = list(self.followers.values())
        follower.start()

    def _unfollow(self, path: str) -> None:
        follower = self.followers.pop(path)
        follower.stop(0.2)
        self._origin.pop(path, None)
        self._caught_up.discard(path)
        self.blind.found("log", path, self.clock.monotonic(), self.clock.wall())
        self.session.sources = tuple(self.followers)
        self.session.watched = list(self.followers.values())

    def _on_glob(self, matches: GlobMatches) -> None:
        pattern = matches.pattern
        if pattern not in self.config.logs:
            return  # dropped by a reload since it was scanned
        self._unscanned.discard(pattern)
        self._scanned.add(pattern)
        now, wall = self.clock.monotonic(), self.clock.wall()
        if matches.paths:
            self._matched.add(pattern)
            self._events.extend(self.blind.found("glob", pattern, now, wall))
        elif pattern in self._matched:
            self.blind.lost("glob", pattern, "matches no file any more", now)
        for path in matches.paths:
            if path not in self.followers:
                self._follow(path, pattern)

    def _covered(self, key: Key) -> bool:
        """A log of a glob that matches nothing any more is said by the glob's own event."""
        origin = self._origin.get(key[1])
        return key[0] == "log" and origin is not None and self.blind.is_lost("glob", origin)

    # --- what the session reports ----------------------------------------------------------

    def _on_notice(self, notice: Notice) -> None:
        if notice.kind in _LOST:
            self.blind.lost("log", notice.path, notice.message, self.clock.monotonic())
        elif notice.kind in _FOUND:
            self._events.extend(self.blind.found("log", notice.path, self.clock.monotonic(),
                                                 self.clock.wall()))

    def _on_event(self, event: Event) -> None:
        if isinstance(event, StallEvent):
            if self.episode is None:
                self.episode = Episode.new(self.name, event.wall, event.phase)
            self._urgent = True
        elif isinstance(event, RecoveredEvent):
            self.episode = None
            self._urgent = True
        self._dirty = True

    def _on_incident(self, incident: Incident) -> None:
        if self.episode is not None:
            self.episode.reported = True
            self._urgent = True

    def _flush_events(self) -> None:
        while self._events:
            events, self._events = self._events, []
            self.session.report(events)
