"""What producers (file followers, `run`'s pipe readers) put on the watch loop's queue."""

from __future__ import annotations

from dataclasses import dataclass

from hangwatch.core.events import Notice

__all__ = ["Block", "CaughtUp", "EndOfInput", "Notice"]


@dataclass(frozen=True)
class Block:
    """Complete lines (each ending in b"\\n") read from `path`."""

    path: str
    data: bytes


@dataclass(frozen=True)
class CaughtUp:
    """A follower read all that existed when it started; `mtime` is the file's last write
    (None when the file did not exist yet)."""

    path: str
    mtime: float | None


@dataclass(frozen=True)
class EndOfInput:
    """A producer has no more to give (the `run` child exited and its pipes are drained)."""
