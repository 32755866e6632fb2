"""Which pipeline phase is in progress, which completed last, and the timeline of both."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal, NamedTuple

from hangwatch.core.events import PhaseEvent
from hangwatch.core.model import PhaseRule

TIMELINE_LIMIT = 1000  # a training loop repeats phases forever; keep the newest entries


@dataclass
class TimelineEntry:
    phase: str
    title: str
    source: str
    line: int
    started_wall: float
    started_stamp: float | None
    state: Literal["running", "completed"] = "running"
    end_line: int | None = None
    ended_wall: float | None = None
    ended_stamp: float | None = None

    def duration(self) -> float | None:
        """Seconds by the times printed on the lines when both carry one, else by wall time."""
        if self.started_stamp is not None and self.ended_stamp is not None:
            return self.ended_stamp - self.started_stamp
        if self.ended_wall is not None:
            return self.ended_wall - self.started_wall
        return None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["duration_s"] = self.duration()
        return data


_ENTRY_FIELDS = tuple(f.name for f in fields(TimelineEntry))


def _entry(data: dict[str, Any]) -> TimelineEntry:
    return TimelineEntry(**{k: data[k] for k in _ENTRY_FIELDS if k in data})


class Where(NamedTuple):
    """Where and when a phase marker was seen."""

    source: str
    line: int
    wall: float
    stamp: float | None


class PhaseTracker:
    """Phases with a `done` pattern stay open until it is seen (they may overlap: Ray actors
    initialise side by side); a phase without one ends when the next phase starts."""

    def __init__(self) -> None:
        self._open: list[tuple[PhaseRule, TimelineEntry]] = []  # oldest first
        self.timeline: list[TimelineEntry] = []
        self.dropped = 0
        self.last_completed: PhaseRule | None = None

    @property
    def current(self) -> PhaseRule | None:
        return self._open[-1][0] if self._open else None

    @property
    def current_entry(self) -> TimelineEntry | None:
        return self._open[-1][1] if self._open else None

    def is_open(self, phase_id: str) -> bool:
        return any(r.id == phase_id for r, _ in self._open)

    def start(self, rule: PhaseRule, where: Where) -> list[PhaseEvent]:
        if self.is_open(rule.id):
            return []  # every rank prints the same START; the first one counts
        events = [self._close(r, e, where) for r, e in list(self._open) if r.done is None]
        entry = TimelineEntry(rule.id, rule.title, where.source, where.line, where.wall,
                              where.stamp)
        self._open.append((rule, entry))
        self._append(entry)
        events.append(self._event(rule, "started", where))
        return events

    def done(self, rule: PhaseRule, where: Where) -> list[PhaseEvent]:
        for r, e in self._open:
            if r.id == rule.id:
                return [self._close(r, e, where)]
        if self.timeline and self.timeline[-1].phase == rule.id:
            return []  # the other ranks' DONE lines for a phase already closed
        # A DONE whose START was never seen (attached late, or the START line was lost).
        entry = TimelineEntry(rule.id, rule.title, where.source, where.line, where.wall,
                              where.stamp)
        self._append(entry)
        return [self._close(rule, entry, where)]

    def finish_all(self, where: Where) -> list[PhaseEvent]:
        """The job said it ended cleanly: whatever was open is complete."""
        return [self._close(r, e, where) for r, e in list(self._open)]

    def _close(self, rule: PhaseRule, entry: TimelineEntry, where: Where) -> PhaseEvent:
        self._open = [(r, e) for r, e in self._open if e is not entry]
        entry.state = "completed"
        entry.end_line = where.line
        entry.ended_wall = where.wall
        entry.ended_stamp = where.stamp
        self.last_completed = rule
        return self._event(rule, "completed", where)

    def _append(self, entry: TimelineEntry) -> None:
        self.timeline.append(entry)
        if len(self.timeline) > TIMELINE_LIMIT:
            del self.timeline[0]
            self.dropped += 1

    # --- kept across restarts (serve's state files) ----------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain data for a state file; `from_dict` gives the tracker back."""
        index = {id(e): i for i, e in enumerate(self.timeline)}
        return {
            "timeline": [asdict(e) for e in self.timeline],
            # An open phase is a timeline entry (by its index) unless it fell off the front.
            "open": [{"phase": r.id, "index": index.get(id(e)),
                      "entry": None if id(e) in index else asdict(e)} for r, e in self._open],
            "dropped": self.dropped,
            "last_completed": self.last_completed.id if self.last_completed else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any],
                  phase: Callable[[str], PhaseRule | None]) -> PhaseTracker:
        """The tracker `to_dict` described. `phase` finds a rule by id in today's rules: an
        open phase whose rule is gone stays in the timeline but is no longer open. Raises
        KeyError, TypeError or ValueError on data that is not what `to_dict` writes."""
        tracker = cls()
        tracker.timeline = [_entry(e) for e in data["timeline"]]
        tracker.dropped = int(data["dropped"])
        for item in data["open"]:
            rule = phase(str(item["phase"]))
            if item["index"] is None:
                entry = _entry(item["entry"])
            else:
                entry = tracker.timeline[int(item["index"])]
            if rule is not None:
                tracker._open.append((rule, entry))
        last = data["last_completed"]
        tracker.last_completed = phase(str(last)) if last is not None else None
        return tracker

    @staticmethod
    def _event(rule: PhaseRule, state: Literal["started", "completed"], where: Where) -> PhaseEvent:
        return PhaseEvent(rule.id, rule.title, state, where.source, where.line, where.wall,
                          where.stamp)
