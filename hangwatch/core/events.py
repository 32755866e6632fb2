"""What the engine tells the outside world. Frozen: reporters read them, nobody edits them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["info", "warning", "error"]


@dataclass(frozen=True)
class Notice:
    """Something about a followed file itself: waiting, appeared, replaced, truncated,
    deleted, unreadable, readable again, or polling instead of notifications."""

    path: str
    kind: str
    message: str


@dataclass(frozen=True)
class Advice:
    """One piece of advice and the evidence that selected it."""

    text: str
    because: str


@dataclass(frozen=True)
class PhaseEvent:
    phase: str
    title: str
    state: Literal["started", "completed"]
    source: str
    line: int
    wall: float
    stamp: float | None = None  # time printed on the line itself, when it carries one


@dataclass(frozen=True)
class SignalEvent:
    id: str
    severity: Severity
    source: str
    line: int
    text: str
    wall: float
    advice: tuple[Advice, ...] = ()


@dataclass(frozen=True)
class FinishEvent:
    id: str
    source: str
    line: int
    text: str
    wall: float


@dataclass(frozen=True)
class StallEvent:
    phase: str | None
    phase_title: str | None
    last_completed: str | None
    idle_s: float
    threshold_s: float
    wall: float
    advice: tuple[Advice, ...] = ()
    signals: tuple[SignalEvent, ...] = field(default=())


@dataclass(frozen=True)
class RecoveredEvent:
    phase: str | None
    stalled_s: float
    source: str
    line: int
    wall: float


@dataclass(frozen=True)
class BlindEvent:
    """hangwatch cannot see: a log unreadable, or deleted and not recreated, for longer than
    the stall threshold (`what` is "log"), or a glob that matched files and now matches none
    (`what` is "glob"). A blind watcher must not look healthy."""

    path: str
    what: Literal["log", "glob"]
    reason: str
    blind_s: float
    wall: float


@dataclass(frozen=True)
class ReadableEvent:
    """What a BlindEvent reported can be seen again."""

    path: str
    what: Literal["log", "glob"]
    blind_s: float
    wall: float


Event = (PhaseEvent | SignalEvent | FinishEvent | StallEvent | RecoveredEvent | BlindEvent
         | ReadableEvent)


@dataclass(frozen=True)
class Incident:
    """A stall with what was gathered about it: where the report went and the advice chosen."""

    stall: StallEvent
    report: str | None
    advice: tuple[Advice, ...]
    findings: tuple[str, ...] = ()
