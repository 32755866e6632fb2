"""What every output receives from the watch loop."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hangwatch.core.events import Event, Incident, Notice


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


def advice_lines(incident: Incident) -> Sequence[str]:
    return [f"{a.text}  (because: {a.because})" for a in incident.advice]
