"""JSON Lines on stdout: one object per event, for machines. Redacted, valid UTF-8 whatever
the log held (see `hangwatch.escape.jsontext`)."""

from __future__ import annotations

import dataclasses
from typing import Any, TextIO

from hangwatch.core.events import (
    BlindEvent,
    CaughtUpEvent,
    Event,
    FinishEvent,
    Incident,
    Notice,
    PhaseEvent,
    ReadableEvent,
    RecoveredEvent,
    SignalEvent,
    SlowEvent,
    StallEvent,
)
from hangwatch.escape.jsontext import dumps
from hangwatch.reporters.base import View


def event_dict(event: Event) -> dict[str, Any] | None:
    """The JSON form of an event; a stall is written once its incident is ready."""
    if isinstance(event, PhaseEvent):
        return {"event": "phase", "phase": event.phase, "title": event.title,
                "state": event.state, "parent": event.parent, "source": event.source,
                "line": event.line, "time": event.wall}
    if isinstance(event, SignalEvent):
        return {"event": "signal", "id": event.id, "kind": event.kind, "severity": event.severity,
                "source": event.source, "line": event.line, "text": event.text,
                "context": event.context, "time": event.wall}
    if isinstance(event, FinishEvent):
        return {"event": "finish", "id": event.id, "source": event.source, "line": event.line,
                "text": event.text, "time": event.wall}
    if isinstance(event, RecoveredEvent):
        return {"event": "recovered", "phase": event.phase,
                "stalled_s": round(event.stalled_s, 3), "source": event.source,
                "line": event.line, "time": event.wall}
    if isinstance(event, BlindEvent):
        return {"event": "blind", "what": event.what, "path": event.path,
                "reason": event.reason, "blind_s": round(event.blind_s, 3), "time": event.wall}
    if isinstance(event, ReadableEvent):
        return {"event": "readable", "what": event.what, "path": event.path,
                "blind_s": round(event.blind_s, 3), "time": event.wall}
    if isinstance(event, SlowEvent):
        return {"event": "slow", "phase": event.phase, "title": event.title,
                "parent": event.parent, "running_s": round(event.running_s, 3),
                "usual_s": event.usual_s, "runs": event.runs, "time": event.wall}
    if isinstance(event, CaughtUpEvent):
        return {"event": "caught_up", "lines": event.lines, "phase_events": event.events,
                "phases": [dataclasses.asdict(span) for span in event.phases],
                "time": event.wall}
    assert isinstance(event, StallEvent)
    return None


def incident_dict(incident: Incident) -> dict[str, Any]:
    stall = incident.stall
    return {
        "event": "stall",
        "phase": stall.phase,
        "phase_title": stall.phase_title,
        "step": stall.step,
        "step_title": stall.step_title,
        "last_step": stall.last_step,
        "marker": stall.marker,
        "last_completed": stall.last_completed,
        "between": stall.between,
        "context": stall.context,
        "place": stall.place,
        "kind": stall.kind,
        "idle_s": round(stall.idle_s, 3),
        "threshold_s": stall.threshold_s,
        "threshold_from": stall.threshold_from,
        "usual": stall.usual,
        "waits": [dataclasses.asdict(w) for w in stall.waits],
        "report": incident.report,
        "advice": [a.text for a in incident.advice],
        "evidence": list(dict.fromkeys(a.because for a in incident.advice)),
        "findings": list(incident.findings),
        "laggards": [dataclasses.asdict(lag) for lag in stall.laggards],
        "laggards_more": stall.laggards_more,
        "rank_summary": stall.rank_summary,
        "desync": stall.desync,
        # Where every process stands, from its stack (empty without a snapshot), and the
        # frames' phase when it differs from the log's.
        "frames_phase": incident.frames_phase,
        "stack_groups": list(incident.stack_groups),
        "suspects": list(incident.suspects),
        "stack_summary": incident.stack_summary,
        "time": stall.wall,
        **_optional(stall, "step", "laggards"),
    }


def _optional(stall: StallEvent, *names: str) -> dict[str, Any]:
    """Fields only some stalls carry."""
    return {name: value for name in names
            if (value := getattr(stall, name, None)) not in (None, (), [])}


class JsonReporter:
    """`fields` go into every object after "event" (serve adds the watch's name). With
    `summarized`, the phase events read while catching up are not written one by one: the
    session's `caught_up` event sums them up, and phase events are written from then on."""

    def __init__(self, out: TextIO, fields: dict[str, Any] | None = None, *,
                 summarized: bool = False) -> None:
        self.out = out
        self.fields = dict(fields or {})
        self._holding = summarized

    def _write(self, data: dict[str, Any]) -> None:
        if self.fields:
            data = {"event": data["event"], **self.fields, **data}
        self.out.write(dumps(data) + "\n")
        self.out.flush()

    def notice(self, notice: Notice) -> None:
        self._write({"event": "notice", "kind": notice.kind, "path": notice.path,
                     "message": notice.message})

    def event(self, event: Event) -> None:
        if isinstance(event, CaughtUpEvent):
            self._holding = False
        elif self._holding and isinstance(event, PhaseEvent):
            return
        data = event_dict(event)
        if data is not None:
            self._write(data)

    def incident(self, incident: Incident) -> None:
        self._write(incident_dict(incident))

    def refresh(self, view: View) -> None:
        """Nothing to redraw: every event was written when it happened."""

    def close(self) -> None:
        self.out.flush()
