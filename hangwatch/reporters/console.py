"""The live terminal view (rich).

While the job makes progress: phase, idle time against the threshold, timeline, last lines
and events. On a stall the answer goes on top, in a panel that always fits the screen (80x24
and up): where it stalled (phase and step), idle against the threshold, the last completed
phase, the ranks holding it up, the report, and the three pieces of advice with the most
specific evidence. Everything else shrinks into what rows are left.

Every string from outside (log lines, file names, findings, evidence) goes through
`hangwatch.escape.terminal`: redacted, control characters shown, never read as markup.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from hangwatch.core.durations import format_duration
from hangwatch.core.events import Event, Incident, Notice, RecoveredEvent, StallEvent
from hangwatch.escape.terminal import rich_text, safe
from hangwatch.reporters.advice import more_line, shown_advice
from hangwatch.reporters.base import View, wait_lines, where_ranks_line
from hangwatch.reporters.plain import describe
from hangwatch.reporters.ranks import COLUMNS, grouped, stall_lines

TIMELINE_ROWS = 8
TAIL_ROWS = 8
LOG_ROWS = 6
TALL = 36  # from this height on, advice and findings get more rows
LABEL = 16  # width of the labels in the stall panel

_NOTICE_STYLES = {"waiting": "yellow", "polling": "yellow", "truncated": "yellow",
                  "unreadable": "red", "deleted": "red", "unwritable": "bold red"}


class ConsoleReporter:
    def __init__(self, out: TextIO, now: Callable[[], float] = time.time,
                 console: Console | None = None) -> None:
        self.console = console or Console(file=out)
        self.now = now
        self.log: deque[Text] = deque(maxlen=LOG_ROWS)
        self.current: Incident | None = None  # the stall on screen, until progress resumes
        self.view: View | None = None
        self.live = Live(console=self.console, auto_refresh=False, transient=False)
        self.live.start()

    def notice(self, notice: Notice) -> None:
        self._log(rich_text(notice.message, _NOTICE_STYLES.get(notice.kind, "cyan")))

    def event(self, event: Event) -> None:
        if isinstance(event, RecoveredEvent):
            self.current = None
        style = "bold red" if isinstance(event, StallEvent) else {
            "PhaseEvent": "green", "SignalEvent": "yellow", "FinishEvent": "bold green",
            "RecoveredEvent": "bold green", "BlindEvent": "bold red",
            "ReadableEvent": "cyan", "SlowEvent": "yellow"}.get(type(event).__name__, "")
        self._log(Text(describe(event), style=style))

    def incident(self, incident: Incident) -> None:
        self.current = incident
        self._draw()

    def refresh(self, view: View) -> None:
        self.view = view
        self._draw()

    def close(self) -> None:
        self._draw()
        self.live.stop()

    def _log(self, text: Text) -> None:
        stamp = time.strftime("%H:%M:%S", time.localtime(self.now()))
        self.log.append(Text(f"{stamp} ").append(text))
        self._draw()

    def _draw(self) -> None:
        self.live.update(self.frame(), refresh=True)

    # --- layout --------------------------------------------------------------------------

    def frame(self) -> RenderableType:
        """What the screen shows now, cut to the terminal's height."""
        width, height = self.console.size
        # One row is the cursor's: a frame as tall as the screen would scroll it by one.
        budget = height - 1
        parts: list[RenderableType] = []
        stalled = self.current is not None or bool(self.view and self.view.collecting)
        if stalled:
            top = self._stall_panel(width, height)
            parts.append(top)
            budget -= self._rows(top, width)
            fillers = [self._status_line, self._ranks, self._tail, self._events,
                       self._timeline]
        else:
            fillers = [self._status_panel, self._ranks, self._timeline, self._tail,
                       self._events]
        for filler in fillers:
            part = self._fit(filler, budget, width)
            if part is not None:
                parts.append(part)
                budget -= self._rows(part, width)
        return Group(*parts)

    def _rows(self, renderable: RenderableType, width: int) -> int:
        options = self.console.options.update(width=width, height=None)
        return len(self.console.render_lines(renderable, options, pad=False))

    def _fit(self, build: Callable[[int], RenderableType | None], budget: int,
             width: int) -> RenderableType | None:
        """The part built with as many rows as the budget leaves room for, or None."""
        if budget <= 0:
            return None
        one = build(1)
        if one is None:
            return None
        overhead = self._rows(one, width) - 1
        rows = budget - overhead
        if rows < 1:
            return None
        part = build(rows)
        return part if part is not None and self._rows(part, width) <= budget else None

    # --- while the job runs --------------------------------------------------------------

    def _status_panel(self, rows: int) -> RenderableType | None:
        view = self.view
        if view is None or rows < 5:
            return None
        state = view.state
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(no_wrap=True, overflow="ellipsis")
        grid.add_row("watching", safe(", ".join(view.sources)))
        grid.add_row("phase", self._phase_text(state))
        if state.get("step"):
            step = state.get("step_title") or state["step"]
            after = f" (after {state['last_step']})" if state.get("last_step") else ""
            grid.add_row("step", safe(f"{step} [{state['step']}]{after}"))
        grid.add_row("last completed", safe(state.get("last_completed_title") or "none"))
        if state.get("between"):
            grid.add_row("between", safe(state["between"]))
        if state.get("context"):
            grid.add_row("context", safe(state["context"]))
        idle, limit = state["idle_s"], state["threshold_s"]
        style = "bold red" if state["stalled"] else ("yellow" if idle > limit / 2 else "green")
        label = "finished" if state["finished"] else (
            f"{format_duration(idle)} of {format_duration(limit)} "
            f"({state.get('threshold_from', 'default')})")
        grid.add_row("since progress", Text(label, style=style))
        grid.add_row("lines", str(sum(state["lines"].values())))
        return Panel(grid, title="hangwatch", title_align="left")

    def _phase_text(self, state: dict[str, Any]) -> str:
        if not state["phase"]:
            return "none yet"
        since = state.get("phase_since_wall")
        elapsed = f" for {format_duration(self.now() - since)}" if since else ""
        return safe(f"{state['phase_title']} [{state['phase']}]{elapsed}")

    def _ranks(self, rows: int) -> RenderableType | None:
        """Ranks in the same phase at the same step share a row; `*` marks a laggard."""
        groups = grouped(self.view.state.get("ranks") or []) if self.view else []
        if not groups:
            return None
        table = Table(title="ranks", title_justify="left", expand=False)
        for column in COLUMNS:
            table.add_column(column, no_wrap=True, overflow="ellipsis")
        for row in groups[:rows]:
            table.add_row(*(safe(cell) for cell in row))
        return table

    def _timeline(self, rows: int) -> RenderableType | None:
        timeline = self.view.state["timeline"] if self.view else []
        if not timeline:
            return None
        table = Table(title="timeline", title_justify="left", expand=False)
        for column in ("phase", "state", "line", "duration"):
            table.add_column(column, no_wrap=True, overflow="ellipsis")
        for entry in timeline[-min(rows, TIMELINE_ROWS):]:
            duration = entry["duration_s"]
            if duration is None:
                duration = self.now() - entry["started_wall"]
            table.add_row(safe(entry["title"]), entry["state"], str(entry["line"]),
                          format_duration(duration))
        return table

    def _tail(self, rows: int) -> RenderableType | None:
        if self.view is None or not self.view.tail:
            return None
        lines = [safe(line[:400]) for line in self.view.tail[-min(rows, TAIL_ROWS):]]
        text = Text("\n".join(lines), style="dim", no_wrap=True, overflow="ellipsis")
        return Panel(text, title="last lines", title_align="left")

    def _events(self, rows: int) -> RenderableType | None:
        if not self.log:
            return None
        shown = list(self.log)[-rows:]
        for text in shown:
            text.no_wrap, text.overflow = True, "ellipsis"
        return Panel(Group(*shown), title="events", title_align="left")

    # --- on a stall ----------------------------------------------------------------------

    def _status_line(self, rows: int) -> RenderableType | None:
        if self.view is None:
            return None
        state = self.view.state
        text = Text(safe(f"watching {', '.join(self.view.sources)} · "
                         f"{sum(state['lines'].values())} lines read"), style="dim",
                    no_wrap=True, overflow="ellipsis")
        return text

    def _stall_panel(self, width: int, height: int) -> Panel:
        inner = width - 4  # borders and padding
        tall = height >= TALL
        rows: list[Text] = []
        incident = self.current
        if incident is None:  # the stall fired; its evidence is still being gathered
            state = self.view.state if self.view else {}
            rows += self._field("stalled in", self._where(state.get("phase_title"),
                                                          state.get("phase"), None), inner)
            rows += self._field("idle", f"{format_duration(state.get('idle_s', 0))} (threshold "
                                f"{format_duration(state.get('threshold_s', 0))})", inner)
            rows += self._field("last completed", state.get("last_completed") or "none", inner)
            if state.get("between"):
                rows += self._field("between", state["between"], inner, lines=2)
            rows.append(Text("collecting evidence...", style="bold red"))
            return self._panel(rows)
        stall = incident.stall
        rows += self._field("stalled in", self._where(stall.phase_title, stall.phase,
                                                      stall.step_title), inner)
        rows += self._field("idle", f"{format_duration(stall.idle_s)} (threshold "
                            f"{format_duration(stall.threshold_s)}, {stall.threshold_from})",
                            inner)
        rows += self._field("last completed", stall.last_completed or "none", inner)
        if stall.between:
            rows += self._field("between", stall.between, inner, lines=2)
        if stall.context:
            rows += self._field("context", stall.context, inner, lines=2)
        for line in stall_lines(dataclasses.asdict(stall))[:3 if tall else 2]:
            style = "bold yellow" if line.startswith("laggard") else ""
            rows += _hang(self.console, Text(""), rich_text(line, style), inner, 2)
        ranks = where_ranks_line(incident)
        if ranks:
            rows += _hang(self.console, Text(f"{ranks[0]:<{LABEL}}", style="bold yellow"),
                          rich_text(ranks[1], "yellow"), inner, 2)
        if incident.frames_phase and tall:
            rows += self._field("frames say", f"{incident.frames_phase} (the log says "
                                f"{stall.phase or 'no phase'})", inner)
        if stall.waits:
            rows += self._field("repeating", wait_lines([dataclasses.asdict(stall.waits[0])])[0],
                                inner, lines=2)
        rows += self._field("report", incident.report or "not written (see findings)",
                            inner, lines=2)
        findings = [f for f in incident.findings if f != incident.stack_summary]
        findings = findings if incident.report else findings[-2:]
        for finding in findings[:3 if tall else 1]:
            rows += _hang(self.console, Text("- ", style="yellow"),
                          rich_text(finding, "yellow"), inner, 1)
        advice, more = shown_advice(incident)
        for number, item in enumerate(advice, 1):
            rows += _hang(self.console, Text(f"{number}. ", style="bold"), rich_text(item.text),
                          inner, 3 if tall else 2)
            because = Text("because ", style="dim italic") + rich_text(item.because, "dim")
            rows += _hang(self.console, Text("   "), because, inner, 2 if tall else 1)
        if more:
            rows.append(Text(more_line(more), style="dim"))
        return self._panel(rows)

    @staticmethod
    def _where(title: str | None, phase: str | None, step: Any) -> str:
        if not phase:
            return "no known phase"
        return f"{title or phase} [{phase}]" + (f", step {step}" if step is not None else "")

    def _field(self, label: str, value: str, inner: int, lines: int = 1) -> list[Text]:
        return _hang(self.console, Text(f"{label:<{LABEL}}", style="bold"), rich_text(value),
                     inner, lines)

    @staticmethod
    def _panel(rows: Sequence[Text]) -> Panel:
        body = Text("\n").join(rows)
        body.no_wrap = True
        return Panel(body, title="STALL", title_align="left", border_style="bold red")


def _hang(console: Console, prefix: Text, body: Text, width: int, lines: int) -> list[Text]:
    """`prefix` then `body` wrapped beside it (a hanging indent), at most `lines` rows; a cut
    ends in an ellipsis."""
    room = max(8, width - len(prefix))
    wrapped = list(body.wrap(console, room))
    if len(wrapped) > lines:
        wrapped = wrapped[:lines]
        wrapped[-1].truncate(room - 1)
        wrapped[-1].rstrip()
        wrapped[-1].append("…")
    pad = Text(" " * len(prefix))
    return [(prefix if i == 0 else pad) + row for i, row in enumerate(wrapped or [Text()])]
