"""What every output receives from the watch loop."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hangwatch.core.durations import format_duration
from hangwatch.core.events import Advice, Event, Incident, Notice


@dataclass(frozen=True)
class View:
    """What a live display shows: the engine's state, the files and their last lines."""

    state: dict[str, Any]
    sources: tuple[str, ...]
    tail: tuple[str, ...] = ()
    notices: tuple[Notice, ...] = field(default=())
    collecting: bool = False  # a stall fired and its evidence is being gathered


class Reporter(Protocol):
    def notice(self, notice: Notice) -> None: ...

    def event(self, event: Event) -> None: ...

    def incident(self, incident: Incident) -> None: ...

    def refresh(self, view: View) -> None: ...

    def close(self) -> None: ...


def advice_groups(advice: Sequence[Advice]) -> list[tuple[str, list[str]]]:
    """Advice grouped by the evidence that chose it, in order, so each reason is said once."""
    groups: list[tuple[str, list[str]]] = []
    for item in advice:
        if groups and groups[-1][0] == item.because:
            groups[-1][1].append(item.text)
        else:
            groups.append((item.because, [item.text]))
    return groups


def where_text(data: Mapping[str, Any]) -> str:
    """`Phase title [id]`, with the step in progress and the last step completed inside it:
    from a stall (as a dict) or the engine's state."""
    phase = data.get("phase")
    if not phase:
        return "no phase in progress"
    text = f"{data.get('phase_title') or phase} [{phase}]"
    if data.get("step"):
        text += f", step: {data.get('step_title') or data['step']} [{data['step']}]"
    if data.get("last_step"):
        text += f", after step {data['last_step']}"
    return text


def wait_lines(waits: Sequence[Mapping[str, Any]]) -> list[str]:
    """The lines that kept repeating instead of progress, most frequent first."""
    return [f"`{w['template']}` repeated {w['count']} times in "
            f"{format_duration(w['span_s'])} ({w['why']})" for w in waits]


def where_ranks_line(incident: Incident) -> tuple[str, str] | None:
    """(label, sentence) naming who holds the job up, from its stacks: the first suspect's why,
    or where the job is stuck as a whole; None without stack groups."""
    if incident.suspects:
        why = str(incident.suspects[0].get("why", ""))
        more = len(incident.suspects) - 1
        if more:
            why += f" (+{more} more suspect{'s' if more > 1 else ''})"
        return "suspect", why
    if incident.stack_groups and incident.stack_summary:
        return "stacks", incident.stack_summary
    return None
