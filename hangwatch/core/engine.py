"""Lines in, events out: the matcher, phase tracker, progress judge and stall timer together.

`feed_*` takes what the job wrote; `tick()` is called by the loop whenever it wakes and
fires the stall when its deadline has passed. Nothing here reads files or sleeps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any

import regex

from hangwatch.core.before import (
    BEFORE_LINES,
    TEXT_CHARS,
    Place,
    bar_at_end,
    interrupted,
    is_stop,
    place_at_silence,
    place_before,
    stack_place,
)
from hangwatch.core.clock import Clock
from hangwatch.core.durations import format_duration
from hangwatch.core.events import (
    Advice,
    Event,
    FinishEvent,
    PhaseEvent,
    RecoveredEvent,
    SignalEvent,
    SlowEvent,
    StallEvent,
    Wait,
)
from hangwatch.core.history import History
from hangwatch.core.lines import last_lines
from hangwatch.core.model import PhaseRule, SignalRule
from hangwatch.core.order import Between, after_finish, before_in_order, expected_next
from hangwatch.core.phases import PhaseTracker, TimelineEntry, Where
from hangwatch.core.prefilter import Prefilter
from hangwatch.core.progress import ProgressJudge
from hangwatch.core.ranks import RankTracker
from hangwatch.core.rules import LineMatch, RuleSet, is_generic_only
from hangwatch.core.segments import Held, Pending, Plain, Spans
from hangwatch.core.stall import StallTimer
from hangwatch.core.timestamps import parse_stamp
from hangwatch.core.waits import WaitDetector
from hangwatch.core.wrap import Unwrapper, physical

# A collective's place in its queue, as the NCCL watchdog prints it.
_COLLECTIVE = regex.compile(r"SeqNum=(?P<seq>\d+),\s*OpType=(?P<op>\w+)")
SIGNAL_REPEAT_S = 10.0  # the same signal is reported again at most this often (NCCL spew)
WAIT_ADVICE = (
    "The job keeps printing the same lines without advancing: it is waiting on something "
    "(a peer, a server, a lock, a resource). The repeated line says what; take stacks with "
    "`py-spy dump --pid PID` to see the call that waits.")
NO_PHASE_ADVICE = (
    "Take stacks with `py-spy dump --pid PID` to see where each process waits, and write a "
    "phase rule for the last marker your trainer prints (`hangwatch rules test LOG`).",
    "A Python job writing through a pipe or file may only look quiet: its output is block "
    "buffered. Run it with `python -u` or `PYTHONUNBUFFERED=1`.",
)


@dataclass
class SignalRecord:
    count: int
    last: SignalEvent
    last_reported: float


class Engine:
    def __init__(self, rules: RuleSet, *, default_stall: float, clock: Clock,
                 prefilter: Prefilter | None = None, stall_given: bool = False,
                 phase_stall: dict[str, float] | None = None,
                 history: History | None = None, live: bool = False,
                 unwrap: bool = True, lines_before: dict[str, int] | None = None) -> None:
        """`live`: lines arrive as they are written (a job's pipes), not from a catch-up.
        `unwrap`: join the rows a terminal wrapped (core/wrap.py); off for a caller that
        feeds lines already joined, or not consecutive (`rules test`). `lines_before`: per
        source, how many lines come before what it is fed (a file's tail read first)."""
        self.rules = rules
        self.prefilter = prefilter  # built for `rules`: blocks are scanned whole, same events
        self.default_stall = default_stall
        self.stall_given = stall_given  # `--stall` was given: it outranks packs' stall_after
        self.phase_stall = dict(phase_stall or {})  # `--phase-stall ID=DURATION`: above all
        self.clock = clock
        self.tracker = PhaseTracker()
        self.timer = StallTimer(clock.monotonic())
        self.judge = ProgressJudge()
        self.waits = WaitDetector()
        self.history = history  # phase durations of earlier runs: `slow` before a stall
        self.live = live  # lines arrive as written (not a catch-up): wall time is duration
        self._slow_said: set[int] = set()  # timeline entries already called slow
        self.ranks = RankTracker(rules.ranks, clock, rules.start_pattern)  # see core/ranks.py
        self.lines: dict[str, int] = dict(lines_before or {})
        self.signals: dict[str, SignalRecord] = {}
        self._phase_signals: dict[str, SignalEvent] = {}  # seen since the current phase began
        self.finished: FinishEvent | None = None
        self.stall: StallEvent | None = None
        self._progressed = False  # progress recorded in the block being read
        self._partials: dict[str, bytes] = {}  # unfinished last lines matched ahead
        self.unwrap = unwrap
        self._unwrappers: dict[str, Unwrapper] = {}
        # What came before a stop line (core/before.py): each source's last lines, the block
        # being read (source, its lines joined, the line count before it), and the place
        # found, looked for once per quiet stretch.
        self._tails: dict[str, list[str]] = {}
        self._block: tuple[str, bytes, int] | None = None
        self._place: Place | None = None
        self._place_named: bool = False  # the place opened the phase in progress
        self._place_looked = False
        self._between: dict[str, Between | None] = {}  # by the phase completed last
        # Nothing open and no stop line: the place the last lines show (`silence`), kept
        # until the source, its line count or the phase completed last changes.
        self._last_fed: str | None = None
        self._silence: tuple[tuple[object, ...], Place | None] | None = None

    # --- input ---------------------------------------------------------------------------

    def feed_block(self, source: str, data: bytes) -> list[Event]:
        """Complete lines, each ending in b"\\n" (what the follower delivers). The block's
        lines are read at one instant: once one is progress, later plain lines cannot change
        when progress happened, so they are not judged (the same through the prefilter)."""
        self._progressed = False
        events: list[Event] = []
        data = self._skip_partial(source, data)
        if not data:
            return events
        joined: list[int] = []
        if self.unwrap:
            data, joined = self._unwrappers.setdefault(source, Unwrapper()).feed(data)
        base = self.lines.get(source, 0)
        self._block = (source, data, base)

        def at(line: int) -> int:  # a line's number in the file: the row where it begins
            return base + physical(line - base, joined) if joined else line

        if self.prefilter is not None:
            events = self._feed_segments(source, data, self.prefilter, at)
        else:
            for raw in _lines(data):
                line = self.lines[source] = self.lines.get(source, 0) + 1
                events.extend(self._line(source, at(line), raw.decode("utf-8", "replace")))
        self.lines[source] += len(joined)  # the rows joined onto others are read too
        self.ranks.feed_block(source, data, self.tracker.current)  # ranks: prefixes, world
        self._block = None
        self._keep_tail(source, last_lines(data, BEFORE_LINES))
        return events

    def _keep_tail(self, source: str, lines: list[bytes]) -> None:
        self._last_fed = source
        tail = self._tails.setdefault(source, [])
        tail.extend(raw.decode("utf-8", "replace") for raw in lines)
        del tail[:-BEFORE_LINES]

    def _feed_segments(self, source: str, data: bytes, prefilter: Prefilter,
                       at: Callable[[int], int]) -> list[Event]:
        """feed_block through the prefilter: only lines a rule hits, and plain lines until
        one is progress, are handled one by one. For the same reason, once the block has
        shown progress, a line that can only repeat the START of an open phase or feed a
        progress rule is set aside (alone as Pending, or in Spans, which the prefilter cuts
        by asking `_repeats_only`): of those, only the last of each rule matters, for what
        the progress judge remembers, and it is handed over before any other line."""
        events: list[Event] = []
        line = self.lines.get(source, 0)
        held = Held(prefilter)
        # The tracker's answers until it moves, by rule: the prefilter asks of every START
        # in each window and on each line it may hand over as Pending.
        by_rule: dict[int, bool] = {}

        def repeats_only(rule: PhaseRule) -> bool:
            found = by_rule.get(id(rule))
            if found is None:
                found = by_rule[id(rule)] = self._repeats_only((rule,))
            return found

        segments = prefilter.segments(data, lambda: not self._progressed, repeats_only)
        for lines, text, match in segments:
            line += lines
            self.lines[source] = line
            if match is None:
                continue
            if isinstance(match, Spans):
                held.add_spans(match)
                continue
            line += 1
            self.lines[source] = line
            if isinstance(match, Plain):
                events.extend(self._plain(source, at(line), text))
                continue
            if isinstance(match, Pending):
                held.add(match)
                continue
            self._release(held, source)
            events.extend(self._matched(source, at(line), text, match))
            by_rule.clear()
        self._release(held, source)
        return events

    def _release(self, held: Held, source: str) -> None:
        if not held:
            return
        for rule, matches in held.release():
            # ranks: each rank's newest set-aside line (counter, phase)
            matches = self.ranks.held(source, rule, matches, self.tracker.current)
            for match in matches:
                if self.judge.remember(rule, match):
                    break

    def feed_partial(self, source: str, data: bytes) -> list[Event]:
        """The unfinished last line of a source that has gone quiet (a tqdm bar's last
        drawing ends only at the next \\r, which may never come): matched now, as the line
        it will be. When that line arrives whole, it is counted but not matched again."""
        if not data or self._partials.get(source) == data:
            return []
        self._partials[source] = data
        self._progressed = False
        events = self._line(source, self.lines.get(source, 0) + 1,
                            data.decode("utf-8", "replace"))
        self._keep_tail(source, [data])
        return events

    def _skip_partial(self, source: str, data: bytes) -> bytes:
        """`data` less its first line when that line was matched ahead as a partial one."""
        partial = self._partials.pop(source, None)
        if partial is None or not data.startswith(partial + b"\n"):
            return data
        self.lines[source] = self.lines.get(source, 0) + 1
        return data[len(partial) + 1:]

    def feed_line(self, source: str, text: str) -> list[Event]:
        """One line: a block of its own."""
        self._progressed = False
        line = self.lines[source] = self.lines.get(source, 0) + 1
        events = self._line(source, line, text)
        self._keep_tail(source, [text.encode("utf-8", "replace")])
        return events

    def _line(self, source: str, line: int, text: str) -> list[Event]:
        """`text`, line `line` of `source`, matched by every rule (no prefilter)."""
        match = self.rules.match(text)
        if match is None:
            return self._plain(source, line, text)
        return self._matched(source, line, text, match)

    def _plain(self, source: str, line: int, text: str) -> list[Event]:
        """A line no rule hits: progress, unless the wait-loop detector finds it repeats."""
        if self._progressed:
            return []
        if not self.waits.judge(source, line, text, self.clock.monotonic()).progress:
            return []
        return self._progress(source, line)

    def backdate(self, idle_s: float) -> None:
        """The log had been quiet `idle_s` seconds before we saw it (its mtime)."""
        self.timer.backdate(self.clock.monotonic(), idle_s)

    def backdate_source(self, source: str, idle_s: float) -> None:
        """One file had been quiet `idle_s` seconds when read to its end: which rank went
        quiet first."""
        self.ranks.backdate(source, idle_s)

    def go_live(self) -> None:
        """Every source is caught up: from now on lines come as written, and the clock times
        them (learned durations)."""
        self.live = True

    # --- state kept across restarts (serve) ----------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """What a restart needs to go on where this engine is: phases and timeline, line
        counts, idle time, a stall in progress, a finish seen. Plain JSON data."""
        now = self.clock.monotonic()
        stalled_at = self.timer.stalled_at
        return {
            "tracker": self.tracker.to_dict(),
            "lines": dict(self.lines),
            "idle_s": self.idle(),
            "stalled_s": None if stalled_at is None else max(0.0, now - stalled_at),
            "finished": asdict(self.finished) if self.finished is not None else None,
        }

    def restore(self, data: dict[str, Any], *, away_s: float, stalled: bool) -> None:
        """Go on from a `snapshot()` (of an engine with the same rules). `away_s`: seconds
        since it was taken (the job's idle time went on meanwhile). `stalled`: keep a stall
        in progress as already fired. Raises KeyError, TypeError or ValueError on malformed
        data, leaving this engine as it was."""
        tracker = PhaseTracker.from_dict(data["tracker"], self.rules.phase)
        lines = {str(k): int(v) for k, v in data["lines"].items()}
        idle = float(data["idle_s"]) + max(0.0, away_s)
        finished = FinishEvent(**data["finished"]) if data["finished"] is not None else None
        stalled_s = None if data["stalled_s"] is None else float(data["stalled_s"])
        now = self.clock.monotonic()
        self.tracker, self.lines, self.finished = tracker, lines, finished
        self.timer.last_progress = now - idle
        if stalled and stalled_s is not None:
            self.timer.stalled_at = now - stalled_s - max(0.0, away_s)
            self.stall = self.diagnosis()

    def restate_stall(self) -> StallEvent | None:
        """The stall in progress as it stands now, kept as this episode's event (a restart
        reports again an episode whose report never got out); None when not stalled."""
        if not self.timer.stalled:
            return None
        self.stall = self.diagnosis()
        return self.stall

    # --- time ----------------------------------------------------------------------------

    def threshold(self) -> float:
        return self.threshold_from()[0]

    def threshold_from(self) -> tuple[float, str]:
        """The stall threshold in force and where it comes from. `--phase-stall` for the
        step or phase in progress wins, then an explicit `--stall`, then the step's or the
        phase's own `stall_after`, then the default."""
        step = self.tracker.current_step
        rules = [r for r in (step[0] if step else None, self.tracker.current) if r is not None]
        for rule in rules:
            if rule.id in self.phase_stall:
                return self.phase_stall[rule.id], f"--phase-stall {rule.id}"
        if self.stall_given:
            return self.default_stall, "--stall"
        for rule in rules:
            if rule.stall_after is not None:
                return rule.stall_after, f"stall_after of {rule.id} in {rule.origin.pack}"
        return self.default_stall, "default"

    def seconds_to_deadline(self) -> float | None:
        """How long the loop may sleep before the stall (or a `slow` word) could fire; None
        when neither can."""
        if self.finished is not None or self.timer.stalled:
            return None
        left = self.timer.seconds_left(self.clock.monotonic(), self.threshold())
        slow = [due for _, _, due in self._running_long()]
        return min([left, *(max(0.0, d) for d in slow)])

    def idle(self) -> float:
        return self.timer.idle(self.clock.monotonic())

    def tick(self) -> list[Event]:
        if self.finished is not None:
            return []
        events: list[Event] = self._slow()
        if self.timer.due(self.clock.monotonic(), self.threshold()):
            self.stall = self._stall_event()
            events.append(self.stall)
        return events

    def _running_long(self) -> list[tuple[PhaseRule, TimelineEntry, float]]:
        """The phase and step in progress whose history says when they are slow, with the
        seconds left until then (negative: already)."""
        if self.history is None:
            return []
        step = self.tracker.current_step
        open_now = [step] if step is not None else []
        if self.tracker.current is not None and self.tracker.current_entry is not None:
            open_now.append((self.tracker.current, self.tracker.current_entry))
        now = self.clock.wall()
        found = []
        for rule, entry in open_now:
            after = self.history.slow_after(rule.id)
            if after is not None and id(entry) not in self._slow_said:
                found.append((rule, entry, entry.started_wall + after - now))
        return found

    def _slow(self) -> list[Event]:
        events: list[Event] = []
        for rule, entry, left in self._running_long():
            usual = self.history.usual(rule.id) if self.history is not None else None
            if left > 0 or usual is None:
                continue
            self._slow_said.add(id(entry))
            events.append(SlowEvent(rule.id, rule.title, self.clock.wall() - entry.started_wall,
                                    usual[0], usual[1], self.clock.wall(), entry.parent))
        return events

    def _learn(self, events: list[Event]) -> None:
        """Phases and steps that completed teach the history how long they take: by the
        times printed on their lines, or by the clock when the lines came as written."""
        if self.history is None:
            return
        for event in events:
            if not (isinstance(event, PhaseEvent) and event.state == "completed"):
                continue
            entry = next((t for t in reversed(self.tracker.timeline)
                          if t.phase == event.phase and t.end_line == event.line), None)
            if entry is None:
                continue
            stamped = entry.started_stamp is not None and entry.ended_stamp is not None
            took = entry.duration()
            if took is not None and (stamped or self.live):
                self.history.record(entry.phase, took)

    # --- state for reporters -------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        current, last = self.tracker.current, self.tracker.last_completed
        entry = self.tracker.current_entry
        step, last_step = self.tracker.current_step, self.tracker.last_step
        threshold, threshold_from = self.threshold_from()
        placed = self.placed()
        return {
            "phase": current.id if current else None,
            "phase_title": current.title if current else None,
            "phase_since_wall": entry.started_wall if entry else None,
            "step": step[0].id if step else None,
            "step_title": step[0].title if step else None,
            "last_step": last_step.id if last_step else None,
            "last_step_title": last_step.title if last_step else None,
            "marker": self._marker(),
            "last_completed": last.id if last else None,
            "last_completed_title": last.title if last else None,
            "between": self._between_text(),
            "context": self._place_text(),
            "place": placed.id if placed else None,
            "place_title": placed.title if placed else None,
            "kind": self._kind(),
            "idle_s": round(self.idle(), 3),
            "threshold_s": threshold,
            "threshold_from": threshold_from,
            "stalled": self.timer.stalled,
            "finished": self.finished is not None,
            "lines": dict(self.lines),
            "signals": [
                {"id": k, "kind": r.last.kind, "severity": r.last.severity,
                 "count": r.count, "line": r.last.line, "source": r.last.source,
                 "text": r.last.text, "context": r.last.context}
                for k, r in self.signals.items()
            ],
            "timeline": self.timeline(),
            "ranks": self.ranks.rows(),
        }

    def timeline(self) -> list[dict[str, Any]]:
        return [e.to_dict() for e in self.tracker.timeline]

    # --- internals -----------------------------------------------------------------------

    def _matched(self, source: str, line: int, text: str, match: LineMatch) -> list[Event]:
        now_wall = self.clock.wall()
        events: list[Event] = []
        starts, dones, signals = match.phase_starts, match.phase_dones, match.signals
        # The printed time goes into the timeline; a repeated START (every step line of a
        # training loop) changes nothing there, so its time is not parsed.
        marks = dones or match.finish or not self.tracker.repeats_only(starts)
        where = Where(source, line, now_wall, parse_stamp(text) if marks else None, text)
        hit = match  # as the line hit: whether only generic rules did is asked of it
        if starts and interrupted(text):  # stopped from outside: the place is before
            starts = _pack_only(starts)
            match = match._replace(phase_starts=starts)
        for rule in starts:  # a generic phase that does not nest: silent in a pack's
            if self._silenced(rule):
                starts = tuple(r for r in starts if not self._silenced(r))
                match = match._replace(phase_starts=starts)
                break
        moved = match.finish is not None  # a phase moved, or the job finished
        for rule in dones:
            closed = self.tracker.done(rule, where)
            if closed:
                moved = True
                events.extend(closed)
        placed = (self._place_stop(source, line, text)
                  if signals and not self._place_looked and is_stop(text) else [])
        for rule in starts:
            started = self._start(rule, where)
            if not started:
                continue
            moved = True
            for event in started:
                if event.state == "started" and event.parent is None:
                    self._phase_signals.clear()
                    self.finished = None  # a new run in the same log
                    break
            events.extend(started)
        for signal in signals:
            events.extend(self._signal(signal, source, line, text, now_wall))
        if match.finish is not None:
            events.extend(self.tracker.finish_all(where))
            self.finished = FinishEvent(match.finish.id, source, line, text, now_wall)
            events.append(self.finished)
        if self.history is not None:
            self._learn(events)
        advanced = self.judge.advances(match.progress) if match.progress else False
        # A phase marker is progress when it moved a phase; a repeat of an open phase's start
        # (a step line, a tqdm redraw) is judged like any other line, counters included.
        default = not match.progress and match.noise is None and not signals
        if starts or dones or signals or match.noise or match.progress or match.finish:
            # ranks: phase, counters, line (a line left with no hit is plain to them too)
            self.ranks.matched(source, text, match, moved or advanced or default)
        if moved or advanced:
            events.extend(self._progress(source, line))
        elif default:
            # Words name where the job is, not whether it moves: a generic line that only
            # repeats is judged as a line no rule knows.
            if is_generic_only(hit):
                events.extend(self._plain(source, line, text))
            else:
                events.extend(self._progress(source, line))
        elif signals and is_generic_only(hit):
            # A generic signal is no progress; one the job keeps printing ("still waiting for
            # rank 3 (attempt 7)") is also a wait loop, which the stall names with its count.
            self.waits.judge(source, line, text, self.clock.monotonic())
        return placed + events if placed else events  # a place named after the fact: no progress

    def _place_stop(self, source: str, line: int, text: str) -> list[Event]:
        """A stop line (timeout, abort, watchdog) takes its place from the lines before it:
        the phase that place names opens when none is open (core/before.py)."""
        self._place_looked = True
        place = place_before(self._lines_before(source), text, self._starts,
                             self._generic_phase)
        current, step = self.tracker.current, self.tracker.current_step
        open_ids = {r.id for r in (current, step[0] if step else None) if r is not None}
        if place is None or (place.phase is not None and place.phase.id in open_ids
                             and not place.counter):
            return []  # the open phase or step already says it
        if current is None and place.by_start:
            return []  # a phase read, and completed, before: what is between says more
        self._place = place
        if current is not None or place.phase is None:
            return []  # beside the open phase: the signal's context says it
        self._place_named = True
        where = Where(source, max(1, line - place.back), self.clock.wall(),
                      parse_stamp(place.text), place.text)
        return list(self._start(place.phase, where))

    def _generic_phase(self, phase_id: str) -> PhaseRule | None:
        return self.rules.phase(f"generic:{phase_id}")

    def _lines_before(self, source: str) -> list[str]:
        """The lines of `source` before the one being matched, oldest first: the last ones
        of earlier blocks, then those of this block (the same whichever way it is read)."""
        tail = list(self._tails.get(source, ()))
        if self._block is not None and self._block[0] == source:
            _, data, base = self._block
            k = self.lines[source] - base - 1
            if k > 0:
                parts = data.split(b"\n", k)[:k]
                tail += [raw.decode("utf-8", "replace") for raw in parts[-BEFORE_LINES:]]
        return tail[-BEFORE_LINES:]

    def _place_text(self) -> str:
        """Where the place of a stop line came from, for the verdict's `context`; with no
        stop line, the place the last lines show (`silence`)."""
        if self._place is None:
            silence = self.silence()
            return f"where it went quiet: {silence.describe('from the end')}" if silence else ""
        if self._place_named:
            return f"named by the line before the stop: {self._place.describe()}"
        return f"before the stop: {self._place.describe()}"

    def silence(self) -> Place | None:
        """Nothing open and no stop line: the newer of a stack printed in the last lines and
        the newest bar, counter or metrics line there, newer than the end of the phase
        completed last, says where the job went quiet (core/before.py: `stack_place`,
        `place_at_silence`). A phase START there was read already, and what is between
        says more."""
        source = self._last_fed
        if self.tracker.current is not None or self._place is not None or source is None:
            return None
        ended = self._ended(source)
        key = (source, self.lines.get(source, 0), ended)
        if self._silence is not None and self._silence[0] == key:
            return self._silence[1]
        tail = self._tails.get(source, [])
        found = [p for p in (stack_place(tail, self.rules.stack_rules, self._generic_phase),
                             place_at_silence(tail, self._starts, self._generic_phase,
                                              self._is_noise)) if p]
        place = min(found, key=lambda p: p.back) if found else None  # the newer of the two
        if place is not None and (place.by_start
                                  or self.lines.get(source, 0) - place.back + 1 <= ended):
            place = None  # a phase read already, or a bar of the phase completed last
        self._silence = (key, place)
        return place

    def _ended(self, source: str) -> int:
        """The line of `source` where the newest phase completed there ended; 0 for none."""
        return max((e.end_line for e in self.tracker.timeline[-8:]
                    if e.source == source and e.end_line is not None), default=0)

    def last_line(self) -> tuple[str, int, str] | None:
        """The newest line read (source, number, text): what a verdict naming no phase
        shows, so that it says what the log does."""
        source = self._last_fed
        tail = self._tails.get(source) if source is not None else None
        if source is None or not tail:
            return None
        return source, self.lines.get(source, 0), tail[-1].rstrip("\r\n")[:TEXT_CHARS]

    def placed(self) -> PhaseRule | None:
        """The phase the place of a stop line or of the silence names, when none is open."""
        if self.tracker.current is not None:
            return None
        place = self._place if self._place is not None else self.silence()
        if place is None or place.finished:
            return None  # past a finished action: what is between names the place
        return place.phase

    def _kind(self) -> str | None:
        """The kind of place (core/model.KINDS) of the step in progress, else of the open
        phase, else of the place the last lines name: one word for any framework's phase."""
        step = self.tracker.current_step
        named = step[0] if step else self.tracker.current or self.placed()
        return named.kind if named is not None else None

    def _signal_kind(self, rule: SignalRule, text: str) -> str | None:
        """The kind of trouble (core/model.SIGNAL_KINDS) a signal line says, one word for any
        framework's: its rule's; for a pack's signal of no kind (a catch-all such as `NCCL
        WARN ...`, a traceback's last line), the kind of the first generic signal whose words
        the line holds (`Connection refused` is a connection error); else None."""
        if rule.kind is not None or rule.origin.generic:
            return rule.kind
        return next((s.kind for s in self.rules.signals
                     if s.origin.generic and s.kind and self.rules.compiled(s.match).search(text)),
                    None)

    def _match(self, text: str) -> LineMatch | None:
        """What a line read again means (a tail's line, a candidate place), by the
        prefilter's databases when there is one: every rule, but only those that may hit it
        searched (and compiled)."""
        return self.prefilter.match(text) if self.prefilter is not None else self.rules.match(text)

    def _is_noise(self, candidate: str) -> bool:
        found = self._match(candidate)
        return found is not None and found.noise is not None

    def _starts(self, candidate: str) -> tuple[PhaseRule, ...]:
        found = self._match(candidate)
        if found is None:
            return ()
        starts = found.phase_starts
        return _pack_only(starts) if starts and interrupted(candidate) else starts

    def between(self) -> Between | None:
        """Nothing open: the place expected next after the last phase completed, or after
        an action the last lines say finished (newer than that phase's end, see `silence`)."""
        if self.tracker.current is not None:
            return self._past_its_bar()
        silence = self.silence()
        if silence is not None and silence.finished:
            last = silence.phase
        else:
            last = self.tracker.last_completed
            done = next((e for e in reversed(self.tracker.timeline) if e.end_line), None)
            if done is not None and done.end_line is not None and \
                    self.lines.get(done.source, 0) - done.end_line > BEFORE_LINES:
                return None  # lines since that no rule names: the job went on past it
        if last is None:
            return None
        if self.finished is not None:
            return after_finish(last, self.rules)
        return self._next_after(last)

    def _next_after(self, rule: PhaseRule) -> Between | None:
        """What the usual order puts after `rule`, kept by its id (the order is the rules')."""
        if rule.id not in self._between:
            self._between[rule.id] = expected_next(rule, self.rules)
        return self._between[rule.id]

    def _past_its_bar(self) -> Between | None:
        """A phase (or step) is open, and the newest line said is a bar at its end: the loop
        it counted is done, so beside the open phase, what comes after it."""
        source = self._last_fed
        step = self.tracker.current_step
        rule = step[0] if step else self.tracker.current
        if source is None or rule is None:
            return None
        newest = next((text for text in reversed(self._tails.get(source, [])[-BEFORE_LINES:])
                       if text.strip() and not self._is_noise(text)
                       and not interrupted(text)), None)
        if newest is None or not bar_at_end(newest):
            return None
        after = self._next_after(rule)
        return replace(after, by=f"{after.by}; its bar reached the end") if after else None

    def _between_text(self) -> str:
        between = self.between()
        return between.text() if between is not None else ""

    def _start(self, rule: PhaseRule, where: Where) -> list[PhaseEvent]:
        """A phase, or a step: one that names its parent, or a generic-layer phase seen while
        a pack's phase is open (the pack's phase is the better name for where the job is)."""
        parent = self.rules.phase(rule.parent) if rule.parent else None
        if parent is None and self._inside_pack_phase(rule):
            parent = self.tracker.current
        if parent is not None:
            return self.tracker.start_step(rule, parent, where)
        return self.tracker.start(rule, where)

    def _usual(self, rule: PhaseRule | None, entry: TimelineEntry | None) -> str:
        """`rollout_init usually takes 2m10s (p95 of 12 runs); now 9m00s`, when known."""
        usual = self.history.usual(rule.id) if self.history and rule else None
        if usual is None or rule is None or entry is None:
            return ""
        return (f"{rule.id} usually takes {format_duration(usual[0])} (p95 of {usual[1]} "
                f"runs); now {format_duration(self.clock.wall() - entry.started_wall)}")

    def _inside_pack_phase(self, rule: PhaseRule) -> bool:
        """A generic-layer phase seen while a pack's phase is open, and not past it: a
        generic phase that does not nest (the training loop), seen while a pack's phase of
        an earlier kind of place is open (its engine's init), says the job moved on."""
        current = self.tracker.current
        return (rule.origin.generic and current is not None and not current.origin.generic
                and (rule.nests or not before_in_order(current, rule)))

    def _silenced(self, rule: PhaseRule) -> bool:
        """A phase that does not nest: a generic one inside a pack's phase (the pack's own
        loop says more), or a pack's inside another pack's phase (a vLLM engine's serving
        lines inside an RL trainer's rollout are the rollout's)."""
        if rule.nests:
            return False
        if rule.origin.generic:
            return self._inside_pack_phase(rule)
        current = self.tracker.current
        return (current is not None and not current.origin.generic
                and current.origin.pack != rule.origin.pack)

    def _repeats_only(self, starts: tuple[PhaseRule, ...]) -> bool:
        """Would these STARTs change nothing (PhaseTracker.repeats_only)? One that does not
        nest, silenced where it is (`_silenced`), changes nothing either."""
        for rule in starts:
            if not rule.nests:  # rare: most STARTs nest
                return self.tracker.repeats_only(tuple(
                    r for r in starts if not self._silenced(r)))
        return self.tracker.repeats_only(starts)

    def _marker(self) -> str | None:
        """The line that opened the step or phase in progress: what chose its name."""
        step = self.tracker.current_step
        entry = step[1] if step else self.tracker.current_entry
        if entry is None:
            return None
        return f"{entry.source}:{entry.line}: {entry.text}"

    def _signal(self, rule: SignalRule, source: str, line: int, text: str,
                wall: float) -> Iterator[SignalEvent]:
        signal_id, severity = rule.id, rule.severity
        context = self._context(text) if severity != "info" else ""
        during = f" ({context})" if context else ""
        because = f"signal {signal_id} at {source}:{line}{during}: {text.strip()[:160]}"
        event = SignalEvent(signal_id, severity, source, line, text, wall,
                            tuple(Advice(a, because) for a in rule.advice), context,
                            self._signal_kind(rule, text))
        self._phase_signals[signal_id] = event
        now = self.clock.monotonic()
        record = self.signals.get(signal_id)
        if record is None:
            self.signals[signal_id] = SignalRecord(1, event, now)
            yield event
            return
        record.count += 1
        record.last = event
        if now - record.last_reported >= SIGNAL_REPEAT_S:
            record.last_reported = now
            yield event

    def _context(self, text: str) -> str:
        """What the job was doing when a warning or error came, by the markers before it,
        and the collective a timeout names: `during Evaluation (generic:evaluation) in
        Training loop; collective ALLREDUCE SeqNum 1204`."""
        step, phase = self.tracker.current_step, self.tracker.current
        last = self.tracker.last_completed
        parts = []
        if step is not None and phase is not None:
            parts.append(f"during {step[0].title} ({step[0].id}) in {phase.title}")
        elif phase is not None:
            parts.append(f"during {phase.title} ({phase.id})")
        elif last is not None:
            parts.append(f"after {last.title} ({last.id})")
        if self._place is not None:
            parts.append(self._place_text())
        collective = _COLLECTIVE.search(text)
        if collective is not None:
            parts.append(f"collective {collective['op']} SeqNum {collective['seq']}")
        return "; ".join(parts)

    def _progress(self, source: str, line: int) -> list[Event]:
        if not self._progressed:  # once a block (as the prefilter sees it, not each line)
            self._place_looked = False  # the next quiet stretch has a stop line of its own
            self._place, self._place_named = None, False
        self._progressed = True
        self.waits.progressed()
        self.ranks.progress(source)  # ranks: a file of one rank moved
        now = self.clock.monotonic()
        stalled_for = self.timer.progress(now)
        if stalled_for is None:
            return []
        phase = self.stall.phase if self.stall else None
        self.stall = None
        return [RecoveredEvent(phase, stalled_for, source, line, self.clock.wall())]

    def diagnosis(self) -> StallEvent:
        """The stall as it stands now (phase, idle time, advice), whether or not it fired."""
        return self._stall_event()

    def _stall_event(self) -> StallEvent:
        phase, last = self.tracker.current, self.tracker.last_completed
        step, last_step = self.tracker.current_step, self.tracker.last_step
        idle = self.idle()
        threshold, threshold_from = self.threshold_from()
        advice: list[Advice] = []
        entry = self.tracker.current_entry
        if step is not None:
            because = (f"step {step[0].id} ({step[0].title}) of {step[1].parent} in progress "
                       f"since {step[1].source}:{step[1].line}, no progress for "
                       f"{format_duration(idle)}")
            advice.extend(Advice(text, because) for text in step[0].advice)
        if phase is not None and entry is not None:
            because = (f"phase {phase.id} ({phase.title}) in progress since "
                       f"{entry.source}:{entry.line}, no progress for {format_duration(idle)}")
            advice.extend(Advice(text, because) for text in phase.advice)
        waits = tuple(Wait(w.shown, w.why, w.count, round(w.last_s - w.first_s, 3), w.last_text)
                      for w in self.waits.waits())
        if waits:
            top = waits[0]
            advice.append(Advice(WAIT_ADVICE, f"`{top.template}` repeated {top.count} times in "
                                              f"{format_duration(top.span_s)}; {top.why}"))
        signals = tuple(self._phase_signals.values())
        for signal in signals:
            if signal.severity != "info":
                advice.extend(signal.advice)
        if not advice:
            where = (f"no phase open; last completed {last.id}" if last
                     else "no phase marker seen yet")
            advice.extend(Advice(text, f"no progress for {format_duration(idle)}, {where}")
                          for text in NO_PHASE_ADVICE)
        ranks = self.ranks.verdict(self.threshold())
        return StallEvent(
            phase=phase.id if phase else None,
            phase_title=phase.title if phase else None,
            last_completed=last.id if last else None,
            idle_s=idle,
            threshold_s=threshold,
            wall=self.clock.wall(),
            advice=tuple(_unique(advice)),
            signals=signals,
            waits=waits,
            step=step[0].id if step else None,
            step_title=step[0].title if step else None,
            last_step=last_step.id if last_step else None,
            marker=self._marker(),
            threshold_from=threshold_from,
            usual=self._usual(step[0] if step else phase, entry if step is None else step[1]),
            laggards=ranks.laggards,
            laggards_more=ranks.laggards_more,
            ranks=ranks.rows,
            rank_summary=ranks.summary,
            desync=ranks.desync,
            between=self._between_text(),
            context=self._place_text(),
            place=placed.id if (placed := self.placed()) else None,
            kind=self._kind(),
        )


def _lines(data: bytes) -> list[bytes]:
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    return parts


def _unique(advice: list[Advice]) -> Iterator[Advice]:
    seen: set[str] = set()
    for item in advice:
        if item.text not in seen:
            seen.add(item.text)
            yield item


def _pack_only(starts: tuple[PhaseRule, ...]) -> tuple[PhaseRule, ...]:
    """The STARTs of a line saying the job was stopped from outside (before.INTERRUPTED): a
    pack's phase says what its framework does then; the generic layer's words there (`shutting
    down workers`) are the reaction to a hang, not its place."""
    return tuple(rule for rule in starts if not rule.origin.generic)
