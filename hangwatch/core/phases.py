"""Which pipeline phase is in progress, which step inside it, what completed last, and the
timeline of all of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal, NamedTuple

from hangwatch.core.events import PhaseEvent
from hangwatch.core.model import PhaseRule

TIMELINE_LIMIT = 1000  # a training loop repeats phases forever; keep the newest entries
MARKER_CHARS = 200  # of the line that opened a phase or step, kept to show what chose it


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
    parent: str | None = None  # the phase this step runs inside
    text: str = ""  # the line that opened it

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
    """Where and when a phase marker was seen, and what it said."""

    source: str
    line: int
    wall: float
    stamp: float | None
    text: str = ""


_Open = tuple[PhaseRule, TimelineEntry]


class PhaseTracker:
    """Phases with a `done` pattern stay open until it is seen (they may overlap: Ray actors
    initialise side by side); a phase without one ends when the next phase starts.

    A step runs inside a phase (a rule with a `parent`, or a generic-layer phase seen while
    a pack's phase is open): starting it leaves the phase open. A step without `done` ends
    when the next step of its phase starts, or when the phase's own START is seen again (a
    training loop's next step line); every step ends with its phase."""

    def __init__(self) -> None:
        self._open: list[_Open] = []  # phases, oldest first
        self._steps: dict[str, list[_Open]] = {}  # open steps by phase id, oldest first
        self._last_step: dict[str, PhaseRule] = {}  # last completed step by open phase id
        self.timeline: list[TimelineEntry] = []
        self.dropped = 0
        self.last_completed: PhaseRule | None = None

    @property
    def current(self) -> PhaseRule | None:
        return self._open[-1][0] if self._open else None

    @property
    def current_entry(self) -> TimelineEntry | None:
        return self._open[-1][1] if self._open else None

    @property
    def current_step(self) -> _Open | None:
        """The newest open step of the phase in progress."""
        steps = self._steps.get(self._open[-1][0].id) if self._open else None
        return steps[-1] if steps else None

    @property
    def last_step(self) -> PhaseRule | None:
        """The last step completed inside the phase in progress."""
        return self._last_step.get(self._open[-1][0].id) if self._open else None

    def is_open(self, phase_id: str) -> bool:
        for rule, _ in self._open:  # noqa: SIM110 (any() over a generator costs twice this)
            if rule.id == phase_id:
                return True
        return False

    def repeats_only(self, starts: tuple[PhaseRule, ...]) -> bool:
        """Would these STARTs change nothing? (Each of an open phase, none of which has a
        step that a repeat of its START would end.) Asked of most lines a rule hits."""
        for rule in starts:
            phase_id = rule.id
            if not self.is_open(phase_id):
                return False
            steps = self._steps.get(phase_id)
            if steps:
                for step, _ in steps:
                    if step.done is None:
                        return False
        return True

    def start(self, rule: PhaseRule, where: Where) -> list[PhaseEvent]:
        if self.is_open(rule.id):
            # every rank prints the same START; the first one counts, but a phase that
            # starts again has moved past the steps it had without an end of their own
            return self._close_steps(rule.id, where, lambda s: s.done is None)
        events = [event for r, entry in list(self._open) if r.done is None
                  for event in self._close(r, entry, where)]
        entry = self._entry(rule, where)
        self._open.append((rule, entry))
        events.append(self._event(rule, "started", where))
        return events

    def start_step(self, rule: PhaseRule, parent: PhaseRule, where: Where) -> list[PhaseEvent]:
        """`rule` begins inside `parent`, which starts too when it was not open."""
        events = [] if self.is_open(parent.id) else self.start(parent, where)
        steps = self._steps.setdefault(parent.id, [])
        if any(r.id == rule.id for r, _ in steps):
            return events
        events += self._close_steps(parent.id, where, lambda s: s.done is None)
        entry = self._entry(rule, where, parent.id)
        steps.append((rule, entry))
        events.append(self._event(rule, "started", where, parent.id))
        return events

    def done(self, rule: PhaseRule, where: Where) -> list[PhaseEvent]:
        for r, e in self._open:
            if r.id == rule.id:
                return self._close(r, e, where)
        for phase_id, steps in self._steps.items():
            if any(r.id == rule.id for r, _ in steps):
                return self._close_steps(phase_id, where, lambda s: s.id == rule.id)
        if self.timeline and self.timeline[-1].phase == rule.id:
            return []  # the other ranks' DONE lines for a phase already closed
        if rule.parent is not None:
            return []  # a step's end outside its phase says nothing of the pipeline
        # A DONE whose START was never seen (attached late, or the START line was lost).
        entry = self._entry(rule, where)
        self._open.append((rule, entry))
        return self._close(rule, entry, where)

    def finish_all(self, where: Where) -> list[PhaseEvent]:
        """The job said it ended cleanly: whatever was open is complete."""
        return [e for r, entry in list(self._open) for e in self._close(r, entry, where)]

    def _close(self, rule: PhaseRule, entry: TimelineEntry, where: Where) -> list[PhaseEvent]:
        events = self._close_steps(rule.id, where, lambda _: True)
        self._steps.pop(rule.id, None)
        self._last_step.pop(rule.id, None)
        self._open = [(r, e) for r, e in self._open if e is not entry]
        self._end(entry, where)
        self.last_completed = rule
        events.append(self._event(rule, "completed", where))
        return events

    def _close_steps(self, phase_id: str, where: Where,
                     which: Callable[[PhaseRule], bool]) -> list[PhaseEvent]:
        steps = self._steps.get(phase_id)
        events: list[PhaseEvent] = []
        if not steps:  # most phases: no step open
            return events
        for rule, entry in [s for s in steps if which(s[0])]:
            steps.remove((rule, entry))
            self._end(entry, where)
            self._last_step[phase_id] = rule
            events.append(self._event(rule, "completed", where, phase_id))
        return events

    def _end(self, entry: TimelineEntry, where: Where) -> None:
        entry.state = "completed"
        entry.end_line = where.line
        entry.ended_wall = where.wall
        entry.ended_stamp = where.stamp

    def _entry(self, rule: PhaseRule, where: Where, parent: str | None = None) -> TimelineEntry:
        entry = TimelineEntry(rule.id, rule.title, where.source, where.line, where.wall,
                              where.stamp, parent=parent,
                              text=where.text.strip()[:MARKER_CHARS])
        self.timeline.append(entry)
        if len(self.timeline) > TIMELINE_LIMIT:
            del self.timeline[0]
            self.dropped += 1
        return entry

    # --- kept across restarts (serve's state files) ----------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain data for a state file; `from_dict` gives the tracker back."""
        index = {id(e): i for i, e in enumerate(self.timeline)}

        def opened(pairs: list[_Open]) -> list[dict[str, Any]]:
            # An open phase or step is a timeline entry (by its index) unless it fell off
            # the front.
            return [{"phase": r.id, "index": index.get(id(e)),
                     "entry": None if id(e) in index else asdict(e)} for r, e in pairs]

        return {
            "timeline": [asdict(e) for e in self.timeline],
            "open": opened(self._open),
            "steps": {phase: opened(steps) for phase, steps in self._steps.items()},
            "last_step": {phase: rule.id for phase, rule in self._last_step.items()},
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

        def reopened(items: list[dict[str, Any]]) -> list[_Open]:
            pairs = []
            for item in items:
                rule = phase(str(item["phase"]))
                entry = (_entry(item["entry"]) if item["index"] is None
                         else tracker.timeline[int(item["index"])])
                if rule is not None:
                    pairs.append((rule, entry))
            return pairs

        tracker._open = reopened(data["open"])
        open_ids = {r.id for r, _ in tracker._open}
        tracker._steps = {p: reopened(items) for p, items in data.get("steps", {}).items()
                          if p in open_ids}
        tracker._last_step = {p: rule for p, step in data.get("last_step", {}).items()
                              if p in open_ids and (rule := phase(str(step))) is not None}
        last = data["last_completed"]
        tracker.last_completed = phase(str(last)) if last is not None else None
        return tracker

    @staticmethod
    def _event(rule: PhaseRule, state: Literal["started", "completed"], where: Where,
               parent: str | None = None) -> PhaseEvent:
        return PhaseEvent(rule.id, rule.title, state, where.source, where.line, where.wall,
                          where.stamp, parent)
