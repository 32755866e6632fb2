"""When a watch cannot see: which logs and globs are lost, since when, and when that becomes a
`blind` event (and `readable` once they are back). Pure: times are passed in."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from hangwatch.core.events import BlindEvent, ReadableEvent

What = Literal["log", "glob"]
Key = tuple[What, str]


@dataclass
class _Lost:
    since: float  # monotonic
    reason: str
    reported: bool = False


class BlindTracker:
    """A subject lost for longer than the threshold is blind; a `blind` event is made once,
    and a `readable` event when it is found again. Lost briefly (a rotation, a recreated
    log) and found again before the threshold: nothing at all."""

    def __init__(self) -> None:
        self._lost: dict[Key, _Lost] = {}

    def lost(self, what: What, path: str, reason: str, now: float) -> None:
        lost = self._lost.get((what, path))
        if lost is None:
            self._lost[(what, path)] = _Lost(now, reason)
        elif not lost.reported:
            lost.reason = reason  # the latest reason says best why, until it is reported

    def found(self, what: What, path: str, now: float, wall: float) -> list[ReadableEvent]:
        lost = self._lost.pop((what, path), None)
        if lost is None or not lost.reported:
            return []
        return [ReadableEvent(path, what, now - lost.since, wall)]

    def is_lost(self, what: What, path: str) -> bool:
        return (what, path) in self._lost

    def due(self, threshold: float, now: float, wall: float,
            covered: Callable[[Key], bool] = lambda _key: False) -> list[BlindEvent]:
        """Blind events for subjects lost `threshold` seconds or more; `covered` tells a
        subject already said by another (a log of a glob that matches nothing)."""
        events = []
        for key, lost in self._lost.items():
            if lost.reported or now - lost.since < threshold or covered(key):
                continue
            lost.reported = True
            events.append(BlindEvent(key[1], key[0], lost.reason, now - lost.since, wall))
        return events

    def seconds_to_due(self, threshold: float, now: float) -> float | None:
        waits = [lost.since + threshold - now for lost in self._lost.values()
                 if not lost.reported]
        return max(0.0, min(waits)) if waits else None

    def blind(self) -> list[str]:
        """What is blind now (reported), for STATUS."""
        return [path for (_, path), lost in self._lost.items() if lost.reported]
