"""What every output receives from the watch loop."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

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
