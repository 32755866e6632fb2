"""What the engine tells the outside world. Frozen: reporters read them, nobody edits them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

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


@dataclass(frozen=True, init=False)
class PhaseEvent:
    """A phase or step started or completed."""

    phase: str
    title: str
    state: Literal["started", "completed"]
    source: str
    line: int
    wall: float
    stamp: float | None = None  # time printed on the line itself, when it carries one
    parent: str | None = None  # a step: the phase it runs inside

    def __init__(self, phase: str, title: str, state: Literal["started", "completed"],
                 source: str, line: int, wall: float, stamp: float | None = None,
                 parent: str | None = None) -> None:
        # One is made for most state changes: the generated __init__ of a frozen dataclass
        # sets each field through object.__setattr__, 0.9 µs; one update of the dict, 0.4.
        self.__dict__.update(phase=phase, title=title, state=state, source=source, line=line,
                             wall=wall, stamp=stamp, parent=parent)


@dataclass(frozen=True)
class SignalEvent:
    id: str
    severity: Severity
    source: str
    line: int
    text: str
    wall: float
    advice: tuple[Advice, ...] = ()
    context: str = ""  # what the job was doing by the markers before it; the collective
    kind: str | None = None  # the kind of trouble it says (core/model.SIGNAL_KINDS)


@dataclass(frozen=True)
class FinishEvent:
    id: str
    source: str
    line: int
    text: str
    wall: float


@dataclass(frozen=True)
class Wait:
    """A line that kept repeating without progress: its template (numbers as <n>), why it
    is not progress, how often and over how long it repeated, and its last text."""

    template: str
    why: str
    count: int
    span_s: float
    last: str


@dataclass(frozen=True)
class Laggard:
    """A rank that holds the job up, and why it was named (core/ranks.py)."""

    source: str | None  # its log file; None for a rank that never logged
    rank: int | str | None  # None: a log file that names no rank
    phase: str | None
    last_progress_s: float | None  # seconds since it last made progress
    counter: float | int | None  # its step (or other counter) when it prints one
    why: str


@dataclass(frozen=True)
class RankRow:
    """One rank's state for tables: live view, report, check."""

    rank: int | str | None
    source: str
    phase: str | None
    counter: float | int | None
    idle_s: float | None
    last_line: str
    laggard: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    waits: tuple[Wait, ...] = ()
    step: str | None = None  # the step in progress inside the phase
    step_title: str | None = None
    last_step: str | None = None  # the last step completed inside the phase
    marker: str | None = None  # `source:line: text` of the line that opened phase or step
    threshold_from: str = "default"  # where the threshold comes from (`--stall`, a phase's ...)
    usual: str = ""  # how long the phase in progress usually takes, when history knows
    laggards: tuple[Laggard, ...] = ()  # empty with several ranks: stuck as a whole
    laggards_more: int = 0  # laggards found beyond those listed (core/ranks.MAX_LAGGARDS)
    ranks: tuple[RankRow, ...] = ()
    rank_summary: str = ""  # who holds the job up, or that no rank stands out
    desync: str = ""  # where each rank's collectives stand, from the NCCL watchdog's lines
    between: str = ""  # nothing open: after the last phase, before the one expected next
    context: str = ""  # the place a stop line took from the lines before it (core/before.py)
    place: str | None = None  # nothing open: the phase that place, or the last lines, name
    kind: str | None = None  # the kind of place (core/model.KINDS) of the step, phase or place


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


@dataclass(frozen=True)
class SlowEvent:
    """A phase (or step) running well past what it usually takes on this job: said before
    the stall threshold, from the durations of earlier runs (`--history`)."""

    phase: str
    title: str
    running_s: float
    usual_s: float  # the 95th percentile of earlier runs
    runs: int
    wall: float
    parent: str | None = None


@dataclass(frozen=True)
class PhaseSpan:
    """One phase (or step, with its parent) over the history: how often it started and
    completed, and the first and last line and time an event of it came from."""

    phase: str
    title: str
    parent: str | None
    started: int
    completed: int
    first_line: int
    last_line: int
    first_time: float
    last_time: float


@dataclass(frozen=True)
class CaughtUpEvent:
    """The history has been read: its phase events in one summary, in the order each phase
    was first seen."""

    phases: tuple[PhaseSpan, ...]
    events: int  # phase events folded into the summary
    lines: int  # lines read by then, all files
    wall: float


Event = (PhaseEvent | SignalEvent | FinishEvent | StallEvent | RecoveredEvent | BlindEvent
         | ReadableEvent | SlowEvent | CaughtUpEvent)


@dataclass(frozen=True)
class Incident:
    """A stall with what was gathered about it: where the report went and the advice chosen."""

    stall: StallEvent
    report: str | None
    advice: tuple[Advice, ...]
    findings: tuple[str, ...] = ()
    # Where every process stands (StackGroups.to_json() shapes): groups largest first, the odd
    # ones out, one sentence; and the frames' phase when it differs from the log's.
    stack_groups: tuple[dict[str, Any], ...] = ()
    suspects: tuple[dict[str, Any], ...] = ()
    stack_summary: str = ""
    frames_phase: str | None = None
