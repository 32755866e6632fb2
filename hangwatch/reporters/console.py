"""The live terminal view (rich): phase, idle time against the threshold, timeline, last lines,
and on a stall a panel with the evidence and the advice."""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TextIO

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from hangwatch.core.durations import format_duration
from hangwatch.core.events import Event, Incident, Notice, StallEvent
from hangwatch.reporters.base import View, advice_groups
from hangwatch.reporters.plain import describe
from hangwatch.reporters.ranks import COLUMNS, grouped, stall_lines

TIMELINE_ROWS = 8
TAIL_ROWS = 8
LOG_ROWS = 6


class ConsoleReporter:
    def __init__(self, out: TextIO, now: Callable[[], float] = time.time,
                 console: Console | None = None) -> None:
        self.console = console or Console(file=out)
        self.now = now
        self.log: deque[Text] = deque(maxlen=LOG_ROWS)
        self.incidents: list[Incident] = []
        self.view: View | None = None
        self.live = Live(console=self.console, auto_refresh=False, transient=False)
        self.live.start()

    def notice(self, notice: Notice) -> None:
        style = "yellow" if notice.kind in ("waiting", "polling", "truncated") else "red" \
            if notice.kind in ("unreadable", "deleted") else "cyan"
        self._log(Text(notice.message, style=style))

    def event(self, event: Event) -> None:
        style = "bold red" if isinstance(event, StallEvent) else {
            "PhaseEvent": "green", "SignalEvent": "yellow", "FinishEvent": "bold green",
            "RecoveredEvent": "bold green", "BlindEvent": "bold red",
            "ReadableEvent": "cyan", "SlowEvent": "yellow"}.get(type(event).__name__, "")
        self._log(Text(describe(event), style=style))

    def incident(self, incident: Incident) -> None:
        self.incidents.append(incident)
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
        parts: list[RenderableType] = []
        if self.view is not None:
            parts.append(self._status(self.view))
            if self.view.state["timeline"]:
                parts.append(self._timeline(self.view.state["timeline"]))
            ranks = grouped(self.view.state.get("ranks") or [])
            if ranks:
                parts.append(self._ranks(ranks))
            if self.view.tail:
                tail = Text("\n".join(line[:200] for line in self.view.tail[-TAIL_ROWS:]),
                            style="dim", no_wrap=True, overflow="ellipsis")
                parts.append(Panel(tail, title="last lines", title_align="left"))
        if self.log:
            parts.append(Panel(Group(*self.log), title="events", title_align="left"))
        parts.extend(self._stall_panel(i) for i in self.incidents[-1:])
        self.live.update(Group(*parts), refresh=True)

    def _status(self, view: View) -> Panel:
        state = view.state
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        grid.add_row("watching", escape(", ".join(view.sources)))
        phase = "none yet"
        if state["phase"]:
            since = state.get("phase_since_wall")
            elapsed = f" for {format_duration(self.now() - since)}" if since else ""
            phase = f"{state['phase_title']} [{state['phase']}]{elapsed}"
        grid.add_row("phase", escape(phase))
        if state.get("step"):
            step = state.get("step_title") or state["step"]
            after = f" (after {state['last_step']})" if state.get("last_step") else ""
            grid.add_row("step", escape(f"{step} [{state['step']}]{after}"))
        grid.add_row("last completed", escape(state.get("last_completed_title") or "none"))
        idle, limit = state["idle_s"], state["threshold_s"]
        style = "bold red" if state["stalled"] else ("yellow" if idle > limit / 2 else "green")
        label = "finished" if state["finished"] else (
            f"{format_duration(idle)} of {format_duration(limit)} "
            f"({state.get('threshold_from', 'default')})")
        grid.add_row("since progress", Text(label, style=style))
        grid.add_row("lines", str(sum(state["lines"].values())))
        if view.collecting:
            grid.add_row("", Text("stall: collecting evidence...", style="bold red"))
        return Panel(grid, title="hangwatch", title_align="left")

    def _timeline(self, timeline: list[dict[str, Any]]) -> Table:
        table = Table(title="timeline", title_justify="left", expand=False)
        for column in ("phase", "state", "line", "duration"):
            table.add_column(column)
        for entry in timeline[-TIMELINE_ROWS:]:
            duration = entry["duration_s"]
            if duration is None:
                duration = self.now() - entry["started_wall"]
            table.add_row(escape(entry["title"]), entry["state"], str(entry["line"]),
                          format_duration(duration))
        return table

    @staticmethod
    def _ranks(rows: list[tuple[str, str, str, str]]) -> Table:
        """Ranks in the same phase at the same step share a row; `*` marks a laggard."""
        table = Table(title="ranks", title_justify="left", expand=False)
        for column in COLUMNS:
            table.add_column(column)
        for row in rows:
            table.add_row(*(escape(cell) for cell in row))
        return table

    def _stall_panel(self, incident: Incident) -> Panel:
        stall = incident.stall
        body = Text()
        body.append("phase in progress: ", style="bold")
        body.append(f"{stall.phase_title or 'none'}" + (f" [{stall.phase}]" if stall.phase
                                                        else "") + "\n")
        body.append("last completed:    ", style="bold")
        body.append(f"{stall.last_completed or 'none'}\n")
        body.append("idle:              ", style="bold")
        body.append(f"{format_duration(stall.idle_s)} (threshold "
                    f"{format_duration(stall.threshold_s)})\n")
        if incident.report:
            body.append("report:            ", style="bold")
            body.append(f"{incident.report}\n")
        for line in stall_lines(dataclasses.asdict(stall)):
            body.append(f"{line}\n", style="bold yellow" if line.startswith("laggard") else "")
        for finding in incident.findings:
            body.append(f"- {finding}\n", style="yellow")
        if incident.advice:
            body.append("\nadvice\n", style="bold")
        for because, texts in advice_groups(incident.advice):
            for text in texts:
                body.append(f"* {text}\n")
            body.append(f"  because {because}\n", style="dim")
        return Panel(body, title="STALL", title_align="left", border_style="bold red")
