"""The one place that wires sources -> engine -> evidence -> incident report -> outputs.

Sources (file followers, or `run`'s pipes) put items on one queue; the session
consumes them on the calling thread, ticks the engine at its deadline, and gathers a stall's
evidence on a worker thread so the loop never blocks on a GPU driver or py-spy.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from hangwatch.core.catchup import CatchUpSummary
from hangwatch.core.durations import format_duration
from hangwatch.core.engine import Engine
from hangwatch.core.events import Advice, Event, Incident, Notice, PhaseEvent, StallEvent
from hangwatch.core.lines import last_lines
from hangwatch.core.stackgroups import frames_phase
from hangwatch.errors import ExitStatus
from hangwatch.reporters.advice import rank_advice
from hangwatch.reporters.base import Reporter, View
from hangwatch.reporters.progress import ReadProgress, file_size
from hangwatch.session.preview import Preview
from hangwatch.sources.feed import Block, CaughtUp, EndOfInput, Partial

TAIL_LINES = 200
QUEUE_BLOCKS = 16  # blocks are up to 1 MiB: back-pressure keeps a catch-up's memory flat
STUCK_CHECK_S = 2.0
MIN_REDRAW_S = 0.1  # a burst of events redraws the live view at most this often


@dataclass(frozen=True)
class _IncidentReady:
    incident: Incident


class Watched(Protocol):
    """A producer the loop can ask whether it is stuck inside a blocking call."""

    path: Path

    def stuck_for(self) -> float: ...


@dataclass(frozen=True)
class SessionOptions:
    report_dir: Path
    exit_on_stall: bool = False
    refresh_s: float | None = None  # redraw period for live views; None: only on events
    stuck_after_s: float = 5.0
    announce: bool = False  # say at start which stall threshold applies (a person reads it)
    turn_s: float | None = None  # the loop turns at least this often (health checks)
    # Tell the history's phase events in one CaughtUpEvent when catch-up ends (`--json`).
    summarize_catch_up: bool = False


Collector = Callable[[StallEvent], tuple[dict[str, Any] | None, list[Advice], list[str]]]
TurnHook = Callable[[Engine], None]  # called on every turn of the loop: it is alive


class Session:
    """`run()` is the whole loop. A caller with a loop of its own (serve, one loop over many
    sessions) gives each session its `queue` and calls `turn()` whenever it wakes."""

    def __init__(self, engine: Engine, reporters: Sequence[Reporter], options: SessionOptions,
                 sources: Sequence[str], *, collect: Collector | None = None,
                 watched: Sequence[Watched] = (), on_turn: Sequence[TurnHook] = (),
                 queue_: queue.Queue[Any] | None = None, preview: Preview | None = None) -> None:
        """`preview`: an engine that read the tail of the (one) log: its place is shown and
        its stall clock runs until `engine` has read the log from the start."""
        self.engine = engine
        self.clock = engine.clock  # one clock for the engine and the loop around it
        self.reporters = list(reporters)
        self.options = options
        self.sources = tuple(sources)
        self.collect = collect
        self.watched: Sequence[Watched] = watched
        self.on_turn = list(on_turn)
        self.queue: queue.Queue[Any] = (queue.Queue(maxsize=QUEUE_BLOCKS) if queue_ is None
                                        else queue_)
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.incidents: list[Incident] = []
        self._caught_up: dict[str, float | None] = {}
        self._summary = CatchUpSummary() if options.summarize_catch_up else None
        self._read_to: dict[str, int] = {}  # while catching up: how far each file is read
        self._reading: dict[str, ReadProgress] = {}
        self._preview = preview
        self._previewed: tuple[str | None, ...] | None = None  # where its stall named
        if preview is not None:
            self._remember_tail(Block(preview.path, preview.data))
        self._collecting: threading.Thread | None = None
        # Events that came while a stall's evidence was being gathered: they go out after
        # its incident, so every output shows a stall before what followed it (a reporter
        # writes the stall once its report is ready).
        self._held: list[tuple[Event, Engine | None]] = []
        self._stuck_reported: set[str] = set()
        self._last_refresh = 0.0
        self._ended = False

    # --- the loop ------------------------------------------------------------------------

    def run(self, should_stop: Callable[[], bool] = lambda: False) -> int:
        """Consume until stopped, the input ends, or (with exit_on_stall) a stall is reported."""
        if self.options.announce:
            self._notice(Notice("", "threshold", threshold_text(self.engine)))
        while not should_stop():
            try:
                item = self.queue.get(timeout=self.wait_s())
            except queue.Empty:
                item = None
            status = self.turn(item)
            if status is not None:
                return status
        return ExitStatus.OK

    def turn(self, item: Any = None) -> int | None:
        """Handle what arrived (None: nothing did), then what is due by the clock; an exit
        status when the loop should end."""
        if item is not None:
            status = self._handle(item)
            if status is not None:
                return status
        if self._preview is not None:
            self._dispatch(self._preview.engine.tick(), self._preview.engine)
        self._dispatch(self.engine.tick())
        if self._preview is None and not self._held:
            # Caught up, and what the real engine said is out: it has told its own stall.
            self._previewed = None
        self._check_stuck()
        self._maybe_refresh()
        for hook in self.on_turn:
            hook(self.engine)
        if self._ended and self._collecting is None:
            return ExitStatus.OK
        return None

    def report(self, events: Sequence[Event]) -> None:
        """Events made outside the engine (serve's blind and readable) go out like its own."""
        self._dispatch(events)

    def wait_s(self) -> float | None:
        """How long the loop may sleep before `turn()` has something to do by the clock."""
        waits = [w for w in (self._shown().seconds_to_deadline(), self.options.refresh_s,
                             self.options.turn_s) if w is not None]
        if self.watched:
            waits.append(STUCK_CHECK_S)
        return max(0.01, min(waits)) if waits else None

    def _handle(self, item: Any) -> int | None:
        if isinstance(item, Block):
            if item.pos is not None and item.path not in self._caught_up:
                self._read_to[item.path] = item.pos.offset
            if not self._in_preview(item):
                self._remember_tail(item)
            self._dispatch(self.engine.feed_block(item.path, item.data))
        elif isinstance(item, Partial):
            self._dispatch(self.engine.feed_partial(item.path, item.data))
        elif isinstance(item, Notice):
            self._notice(item)
        elif isinstance(item, CaughtUp):
            self._caught_up_with(item)
        elif isinstance(item, EndOfInput):
            self._ended = True
        elif isinstance(item, _IncidentReady):
            self._collecting = None
            self.incidents.append(item.incident)
            for reporter in self.reporters:
                reporter.incident(item.incident)
            held, self._held = self._held, []
            for event, engine in held:
                self._dispatch([event], engine)
            if self.options.exit_on_stall:
                return ExitStatus.STALL
        return None

    def _dispatch(self, events: Sequence[Event], engine: Engine | None = None) -> None:
        """`engine`: the one the events come from, when not the session's own (a preview)."""
        for i, event in enumerate(events):
            if self._collecting is not None:
                self._held.extend((e, engine) for e in events[i:])
                break
            if self._summary is not None and isinstance(event, PhaseEvent):
                self._summary.add(event)
            if isinstance(event, StallEvent):
                place = (event.phase, event.step, event.last_step, event.last_completed,
                         event.marker)
                if engine is not None:
                    self._previewed = place
                elif self._previewed is not None:
                    seen, self._previewed = self._previewed, None
                    if seen == place:
                        continue  # the preview reported this stall already
                    # else the whole log names it otherwise: this one corrects the preview
            for reporter in self.reporters:
                reporter.event(event)
            if isinstance(event, StallEvent):
                self._start_collecting(event, engine or self.engine)
        if events:
            self._refresh()

    def _notice(self, notice: Notice) -> None:
        for reporter in self.reporters:
            reporter.notice(notice)

    # --- catch-up and file health --------------------------------------------------------

    def _caught_up_with(self, item: CaughtUp) -> None:
        self._caught_up[item.path] = item.mtime
        self._read_to.pop(item.path, None)
        self._reading.pop(item.path, None)
        if item.mtime is not None:  # each file's last write: which rank went quiet first
            self.engine.backdate_source(item.path, max(0.0, self.clock.wall() - item.mtime))
        if len(self._caught_up) < len(self.sources):
            return
        self.engine.go_live()
        self._preview = None  # the whole log is read: its place replaces the tail's
        if self._summary is not None:
            summary, self._summary = self._summary, None
            self._dispatch([summary.event(sum(self.engine.lines.values()), self.clock.wall())])
        written = [m for m in self._caught_up.values() if m is not None]
        if written:
            # Lines read during catch-up are history: the job's last progress is the
            # file's last write, so a log already quiet past the threshold stalls at once.
            self.engine.backdate(max(0.0, self.clock.wall() - max(written)))

    def _check_stuck(self) -> None:
        for watched in self.watched:
            path = str(watched.path)
            stuck = watched.stuck_for()
            if stuck >= self.options.stuck_after_s and path not in self._stuck_reported:
                self._stuck_reported.add(path)
                self._notice(Notice(path, "unreadable",
                                    f"{path}: reading has blocked for {stuck:.0f}s (stale "
                                    f"mount or hung filesystem?); stall timer keeps running"))
            elif stuck < self.options.stuck_after_s and path in self._stuck_reported:
                self._stuck_reported.discard(path)
                self._notice(Notice(path, "readable", f"{path}: reading works again"))

    def _in_preview(self, block: Block) -> bool:
        """A catch-up block of lines the preview put in the tail already."""
        preview = self._preview
        return (preview is not None and block.path == preview.path and block.pos is not None
                and block.pos.offset <= preview.end)

    def _shown(self) -> Engine:
        """The engine whose place is shown and timed: the preview until caught up."""
        return self._preview.engine if self._preview is not None else self.engine

    def _remember_tail(self, block: Block) -> None:
        lines = last_lines(block.data, TAIL_LINES)
        prefix = f"{Path(block.path).name}: " if len(self.sources) > 1 else ""
        self.tail.extend(prefix + raw.decode("utf-8", "replace") for raw in lines if raw)

    # --- evidence on a stall -------------------------------------------------------------

    def _start_collecting(self, stall: StallEvent, engine: Engine) -> None:
        timeline = engine.timeline()
        tail = list(self.tail)
        worker = threading.Thread(target=self._gather, args=(stall, timeline, tail),
                                  name="hangwatch-evidence", daemon=True)
        self._collecting = worker
        worker.start()

    def _gather(self, stall: StallEvent, timeline: list[dict[str, Any]], tail: list[str]) -> None:
        snapshot: dict[str, Any] | None = None
        diagnosed: list[Advice] = []
        findings: list[str] = []
        report: str | None = None
        if self.collect is not None:
            try:
                snapshot, diagnosed, findings = self.collect(stall)
            except Exception as exc:  # evidence must never take the watcher down
                findings.append(f"evidence collection failed: {type(exc).__name__}: {exc}")
        advice = rank_advice(stall, diagnosed)
        # Absolute: machines (JSON events, alerts) read it from elsewhere.
        report_dir = self.options.report_dir.absolute()
        try:
            from hangwatch.reporters.incident import write_incident

            report = str(write_incident(report_dir, stall=stall, timeline=timeline,
                                        log_tail=tail, sources=self.sources,
                                        snapshot=snapshot, advice=advice))
        except Exception as exc:  # a full, read-only or hostile report disk
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            message = (f"cannot write the incident report in {report_dir}: {reason}; "
                       f"the stall and its advice are shown here, and watching goes on")
            findings.append(message)
            self.queue.put(Notice(str(report_dir), "unwritable", message))
        snap = snapshot or {}
        groups = tuple(snap.get("stack_groups") or ())
        self.queue.put(_IncidentReady(Incident(
            stall, report, tuple(advice), tuple(dict.fromkeys(findings)),
            stack_groups=groups, suspects=tuple(snap.get("suspects") or ()),
            stack_summary=snap.get("stack_summary") or "",
            frames_phase=frames_phase(stall.phase, groups))))

    # --- live views ----------------------------------------------------------------------

    def _maybe_refresh(self) -> None:
        period = self.options.refresh_s
        if period is not None and self.clock.monotonic() - self._last_refresh >= period:
            self._refresh()

    def _refresh(self) -> None:
        now = self.clock.monotonic()
        if self.options.refresh_s is None or now - self._last_refresh < MIN_REDRAW_S:
            return
        self._last_refresh = now
        view = View(self._shown().state(), self.sources, tuple(list(self.tail)[-10:]),
                    collecting=self._collecting is not None, reading=self._reading_texts(now))
        for reporter in self.reporters:
            reporter.refresh(view)

    def _reading_texts(self, now: float) -> tuple[str, ...]:
        """How far each file still being caught up with has been read."""
        texts = []
        for path, offset in self._read_to.items():
            if path in self._caught_up:
                continue
            progress = self._reading.setdefault(path, ReadProgress(Path(path).name))
            progress.update(offset, file_size(path), now)
            texts.append(progress.text())
        return tuple(texts)

    def close(self) -> None:
        held, self._held = self._held, []
        for event, _ in held:  # the loop ended before the stall's incident: still said
            for reporter in self.reporters:
                reporter.event(event)
        for reporter in self.reporters:
            reporter.close()


def threshold_text(engine: Engine) -> str:
    """Which stall threshold applies and where it comes from, said once at start-up."""
    threshold, source = engine.threshold_from()
    text = f"stall threshold {format_duration(threshold)} ({source})"
    if source == "default":
        text += "; a phase's own stall_after applies while it is open (--stall outranks them)"
    return text
