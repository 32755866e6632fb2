"""Plain timestamped lines, for logs, pipes and CI consoles."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TextIO

from hangwatch.core.durations import format_duration
from hangwatch.core.events import (
    Event,
    FinishEvent,
    Incident,
    Notice,
    PhaseEvent,
    RecoveredEvent,
    SignalEvent,
)
from hangwatch.escape.terminal import safe
from hangwatch.reporters.advice import more_line, shown_advice
from hangwatch.reporters.base import View, advice_groups


def describe(event: Event) -> str:
    """One line for an event, shared by every human-facing output; what came from outside
    (log text, file names) is redacted and its control characters shown."""
    return safe(_describe(event))


def _describe(event: Event) -> str:
    if isinstance(event, PhaseEvent):
        return f"phase {event.phase} ({event.title}) {event.state} at {event.source}:{event.line}"
    if isinstance(event, SignalEvent):
        return (f"{event.severity}: {event.id} at {event.source}:{event.line}: "
                f"{event.text.strip()[:200]}")
    if isinstance(event, FinishEvent):
        return f"job finished cleanly ({event.id}) at {event.source}:{event.line}"
    if isinstance(event, RecoveredEvent):
        return (f"recovered: progress again at {event.source}:{event.line} after "
                f"{format_duration(event.stalled_s)} stalled")
    return (f"STALL in phase {event.phase or 'unknown'}: no progress for "
            f"{format_duration(event.idle_s)}; collecting evidence")


def describe_incident(incident: Incident) -> list[str]:
    """The stall, where it is, and the most specific advice; each line terminal-safe."""
    stall = incident.stall
    phase = f"{stall.phase} ({stall.phase_title})" if stall.phase else "no phase in progress"
    step = getattr(stall, "step", None)
    if step is not None:
        phase += f", step {step}"
    lines = [
        f"STALL: no progress for {format_duration(stall.idle_s)} "
        f"(threshold {format_duration(stall.threshold_s)})",
        f"  phase in progress: {phase}",
        f"  last completed:    {stall.last_completed or 'none'}",
    ]
    laggards = laggard_texts(stall)
    if laggards:
        lines.append(f"  laggards:          {', '.join(laggards)}")
    if incident.report:
        lines.append(f"  report:            {incident.report}")
    lines += [f"  finding: {f}" for f in incident.findings]
    advice, more = shown_advice(incident)
    for because, texts in advice_groups(advice):
        lines += [f"  advice: {text}" for text in texts]
        lines.append(f"          because: {because}")
    if more:
        lines.append(f"  ({more_line(more)})")
    return [safe(line) for line in lines]


def laggard_texts(stall: object, limit: int = 4) -> list[str]:
    """The ranks holding the job up, when the stall names them: `rank 3 (step 118)`."""
    laggards = getattr(stall, "laggards", None) or ()
    texts = [_laggard_text(item) for item in list(laggards)[:limit]]
    if len(laggards) > limit:
        texts.append(f"{len(laggards) - limit} more")
    return texts


def _laggard_text(item: object) -> str:
    fields: object = item
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        fields = dataclasses.asdict(item)
    if not isinstance(fields, dict) or "rank" not in fields:
        return str(item)
    detail = ", ".join(f"{k} {v}" for k, v in fields.items()
                       if k != "rank" and v is not None and not isinstance(v, (dict, list)))
    return f"rank {fields['rank']}" + (f" ({detail})" if detail else "")


class PlainReporter:
    def __init__(self, out: TextIO, now: Callable[[], float] = time.time) -> None:
        self.out = out
        self.now = now

    def _write(self, text: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self.now()))
        for line in text.splitlines():
            self.out.write(f"{stamp} {line}\n")
        self.out.flush()

    def notice(self, notice: Notice) -> None:
        self._write(f"hangwatch: {safe(notice.message)}")

    def event(self, event: Event) -> None:
        self._write(describe(event))

    def incident(self, incident: Incident) -> None:
        self._write("\n".join(describe_incident(incident)))

    def refresh(self, view: View) -> None:
        """Plain output changes only when something happens."""

    def close(self) -> None:
        self.out.flush()
