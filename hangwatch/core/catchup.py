"""What a catch-up read: the phase events of a log's history folded into one summary.

Attaching to a run that has gone for hours reads hundreds of thousands of phase events that
all happened before anyone watched. A machine reading `--json` wants where the job is now and
what it went through, not every one of them again: `CatchUpSummary` counts them per phase
(and step), with the span of lines and times they covered, and gives one `CaughtUpEvent`.
"""

from __future__ import annotations

from hangwatch.core.events import CaughtUpEvent, PhaseEvent, PhaseSpan


class CatchUpSummary:
    def __init__(self) -> None:
        self._spans: dict[tuple[str, str | None], PhaseSpan] = {}
        self.events = 0

    def add(self, event: PhaseEvent) -> None:
        self.events += 1
        key = (event.phase, event.parent)
        started = event.state == "started"
        span = self._spans.get(key)
        if span is None:
            self._spans[key] = PhaseSpan(event.phase, event.title, event.parent, int(started),
                                         int(not started), event.line, event.line,
                                         event.wall, event.wall)
            return
        self._spans[key] = PhaseSpan(span.phase, span.title, span.parent,
                                     span.started + started, span.completed + (not started),
                                     span.first_line, event.line, span.first_time, event.wall)

    def event(self, lines: int, wall: float) -> CaughtUpEvent:
        return CaughtUpEvent(tuple(self._spans.values()), self.events, lines, wall)
