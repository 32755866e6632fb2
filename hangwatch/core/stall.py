"""No progress for the threshold -> one stall per episode; progress again -> recovered."""

from __future__ import annotations


class StallTimer:
    """Works on monotonic seconds only, so a wall-clock jump never fires or hides a stall."""

    def __init__(self, now: float) -> None:
        self.last_progress = now
        self.stalled_at: float | None = None

    @property
    def stalled(self) -> bool:
        return self.stalled_at is not None

    def idle(self, now: float) -> float:
        return max(0.0, now - self.last_progress)

    def progress(self, now: float) -> float | None:
        """Record progress; return how long the stall lasted when this ends one."""
        self.last_progress = now
        if self.stalled_at is None:
            return None
        stalled_for, self.stalled_at = now - self.stalled_at, None
        return stalled_for

    def due(self, now: float, threshold: float) -> bool:
        """True exactly once per episode: when idle time first reaches the threshold."""
        if self.stalled_at is not None or self.idle(now) < threshold:
            return False
        self.stalled_at = now
        return True

    def backdate(self, now: float, idle_s: float) -> None:
        """The log was already quiet for `idle_s` before we started watching it."""
        self.last_progress = min(self.last_progress, now - max(0.0, idle_s))

    def seconds_left(self, now: float, threshold: float) -> float:
        return max(0.0, self.last_progress + threshold - now)
