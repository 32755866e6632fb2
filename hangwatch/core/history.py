"""How long each phase usually takes, learned from earlier runs of the same job.

A phase running well past its usual time is worth a word before the stall threshold: a
rollout init that takes 2 minutes on every run and is at 9 minutes now is stuck, even if
its `stall_after` allows 20. The durations are plain data (`to_dict`/`from_dict`); reading
and writing the file is left to the command that owns it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KEPT = 50  # durations kept per phase: the newest runs tell the usual
MIN_RUNS = 3  # fewer runs than this teach nothing
SLOW_FACTOR = 3.0  # slow: past this many times the usual (p95)
SLOW_FLOOR_S = 60.0  # and never sooner than this: short phases jitter


@dataclass
class History:
    durations: dict[str, list[float]] = field(default_factory=dict)  # by phase id, oldest first

    def record(self, phase: str, seconds: float) -> None:
        kept = self.durations.setdefault(phase, [])
        kept.append(round(max(0.0, seconds), 3))
        del kept[:-KEPT]

    def usual(self, phase: str) -> tuple[float, int] | None:
        """The 95th percentile of the phase's durations and how many runs it comes from."""
        kept = sorted(self.durations.get(phase, ()))
        if len(kept) < MIN_RUNS:
            return None
        return kept[min(len(kept) - 1, int(0.95 * len(kept)))], len(kept)

    def slow_after(self, phase: str) -> float | None:
        """When the phase, still running, is slow; None while the history is too short."""
        usual = self.usual(phase)
        return None if usual is None else max(SLOW_FLOOR_S, SLOW_FACTOR * usual[0])

    def to_dict(self) -> dict[str, Any]:
        return {"durations": self.durations}

    @classmethod
    def from_dict(cls, data: Any) -> History:
        """A history from `to_dict`'s data; ValueError when it is not that."""
        durations = data.get("durations") if isinstance(data, dict) else None
        if not isinstance(durations, dict) or not all(
                isinstance(k, str) and isinstance(v, list)
                and all(isinstance(x, (int, float)) for x in v)
                for k, v in durations.items()):
            raise ValueError("not a hangwatch history")
        return cls({k: [float(x) for x in v][-KEPT:] for k, v in durations.items()})
