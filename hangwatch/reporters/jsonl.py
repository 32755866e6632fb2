"""JSON Lines on stdout: one object per event, for machines. Redacted, valid UTF-8 whatever
the log held (see `hangwatch.escape.jsontext`)."""

from __future__ import annotations

from typing import Any, TextIO

from hangwatch.core.events import (
    Event,
    FinishEvent,
    Incident,
    Notice,
    PhaseEvent,
    RecoveredEvent,
    SignalEvent,
    StallEvent,
)
from hangwatch.escape.jsontext import dumps
from hangwatch.reporters.base import View


def event_dict(event: Event) -> dict[str, Any] | None:
    """The JSON form of an event; a stall is written once its incident is ready."""
    if isinstance(event, PhaseEvent):
        return {"event": "phase", "phase": event.phase, "title": event.title,
                "state": event.state, "source": event.source, "line": event.line,
                "time": event.wall}
    if isinstance(event, SignalEvent):
        return {"event": "signal", "id": event.id, "severity": event.severity,
                "source": event.source, "line": event.line, "text": event.text,
                "time": event.wall}
    if isinstance(event, FinishEvent):
        return {"event": "finish", "id": event.id, "source": event.source, "line": event.line,
                "text": event.text, "time": event.wall}
    if isinstance(event, RecoveredEvent):
        return {"event": "recovered", "phase": event.phase,
                "stalled_s": round(event.stalled_s, 3), "source": event.source,
                "line": event.line, "time": event.wall}
    assert isinstance(event, StallEvent)
    return None


def incident_dict(incident: Incident) -> dict[str, Any]:
    stall = incident.stall
    return {
        "event": "stall",
        "phase": stall.phase,
        "phase_title": stall.phase_title,
        "last_completed": stall.last_completed,
        "idle_s": round(stall.idle_s, 3),
        "threshold_s": stall.threshold_s,
        "report": incident.report,
        "advice": [a.text for a in incident.advice],
        "evidence": [a.because for a in incident.advice],
        "findings": list(incident.findings),
        "time": stall.wall,
        **_optional(stall, "step", "laggards"),
    }


def _optional(stall: StallEvent, *names: str) -> dict[str, Any]:
    """Fields only some stalls carry."""
    return {name: value for name in names
            if (value := getattr(stall, name, None)) not in (None, (), [])}


class JsonReporter:
    def __init__(self, out: TextIO) -> None:
        self.out = out

    def _write(self, data: dict[str, Any]) -> None:
        self.out.write(dumps(data) + "\n")
        self.out.flush()

    def notice(self, notice: Notice) -> None:
        self._write({"event": "notice", "kind": notice.kind, "path": notice.path,
                     "message": notice.message})

    def event(self, event: Event) -> None:
        data = event_dict(event)
        if data is not None:
            self._write(data)

    def incident(self, incident: Incident) -> None:
        self._write(incident_dict(incident))

    def refresh(self, view: View) -> None:
        """Nothing to redraw: every event was written when it happened."""

    def close(self) -> None:
        self.out.flush()
