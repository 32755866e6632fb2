"""Plain timestamped lines, for logs, pipes and CI consoles."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TextIO

from hangwatch.core.durations import format_duration
from hangwatch.core.events import (
    BlindEvent,
    Event,
    FinishEvent,
    Incident,
    Notice,
    PhaseEvent,
    ReadableEvent,
    RecoveredEvent,
    SignalEvent,
    SlowEvent,
)
from hangwatch.escape.terminal import safe
from hangwatch.reporters.advice import more_line, shown_advice
from hangwatch.reporters.base import (
    View,
    advice_groups,
    wait_lines,
    where_ranks_line,
    where_text,
)
from hangwatch.reporters.ranks import stall_lines


def describe(event: Event) -> str:
    """One line for an event, shared by every human-facing output; what came from outside
    (log text, file names) is redacted and its control characters shown."""
    return safe(_describe(event))


def _describe(event: Event) -> str:
    if isinstance(event, PhaseEvent):
        kind = f"step {event.phase} ({event.title}) of {event.parent}" if event.parent else (
            f"phase {event.phase} ({event.title})")
        return f"{kind} {event.state} at {event.source}:{event.line}"
    if isinstance(event, SignalEvent):
        during = f" ({event.context})" if event.context else ""
        return (f"{event.severity}: {event.id} at {event.source}:{event.line}{during}: "
                f"{event.text.strip()[:200]}")
    if isinstance(event, FinishEvent):
        return f"job finished cleanly ({event.id}) at {event.source}:{event.line}"
    if isinstance(event, RecoveredEvent):
        return (f"recovered: progress again at {event.source}:{event.line} after "
                f"{format_duration(event.stalled_s)} stalled")
    if isinstance(event, BlindEvent):
        return (f"BLIND: cannot see {event.what} {event.path} for "
                f"{format_duration(event.blind_s)}: {event.reason}")
    if isinstance(event, ReadableEvent):
        return (f"readable: {event.what} {event.path} can be seen again after "
                f"{format_duration(event.blind_s)}")
    if isinstance(event, SlowEvent):
        return (f"slow: {event.phase} ({event.title}) running for "
                f"{format_duration(event.running_s)}; it usually takes "
                f"{format_duration(event.usual_s)} (p95 of {event.runs} runs)")
    return (f"STALL in phase {event.phase or 'unknown'}: no progress for "
            f"{format_duration(event.idle_s)}; collecting evidence")


def describe_incident(incident: Incident) -> list[str]:
    """The stall, where it is, and the most specific advice; each line terminal-safe."""
    stall = incident.stall
    data = dataclasses.asdict(stall)
    lines = [
        f"STALL: no progress for {format_duration(stall.idle_s)} "
        f"(threshold {format_duration(stall.threshold_s)}, {stall.threshold_from})",
        f"  phase in progress: {where_text(data)}",
        f"  last completed:    {stall.last_completed or 'none'}",
    ]
    if stall.between:
        lines.append(f"  between phases:    {stall.between}")
    if stall.marker:
        lines.append(f"  named by:          {stall.marker}")
    if stall.context:
        lines.append(f"  context:           {stall.context}")
    if stall.usual:
        lines.append(f"  usually:           {stall.usual}")
    lines += [f"  repeating:         {line}" for line in wait_lines(data["waits"])[:3]]
    if incident.report:
        lines.append(f"  report:            {incident.report}")
    if incident.frames_phase:
        lines.append(f"  the frames say:   {incident.frames_phase} (the log says "
                     f"{stall.phase or 'no phase'})")
    lines += [f"  {line}" for line in stall_lines(dataclasses.asdict(stall))]
    ranks = where_ranks_line(incident)
    if ranks:
        lines.append(f"  {ranks[0] + ':':<19}{ranks[1]}")
    # The groups' sentence leads the findings: said once, above.
    lines += [f"  finding: {f}" for f in incident.findings if f != incident.stack_summary]
    advice, more = shown_advice(incident)
    for because, texts in advice_groups(advice):
        lines += [f"  advice: {text}" for text in texts]
        lines.append(f"          because: {because}")
    if more:
        lines.append(f"  ({more_line(more)})")
    return [safe(line) for line in lines]


class PlainReporter:
    """`prefix` starts every line after the time (serve: the watch's name)."""

    def __init__(self, out: TextIO, now: Callable[[], float] = time.time,
                 prefix: str = "") -> None:
        self.out = out
        self.now = now
        self.prefix = prefix

    def _write(self, text: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self.now()))
        for line in text.splitlines():
            self.out.write(f"{stamp} {self.prefix}{line}\n")
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
