"""What producers (file followers, `run`'s pipe readers) put on the watch loop's queue."""

from __future__ import annotations

from dataclasses import dataclass

from hangwatch.core.events import Notice

__all__ = ["Block", "CaughtUp", "EndOfInput", "FilePos", "Notice", "Partial"]


@dataclass(frozen=True)
class FilePos:
    """A place in one file: which file (device, inode, and a fingerprint of its first line,
    up to 4 KiB) and the offset just after a complete line. What a restart resumes from."""

    dev: int
    ino: int
    fingerprint: str
    offset: int


@dataclass(frozen=True)
class Block:
    """Complete lines (each ending in b"\\n") read from `path`; `pos` is where they end in
    the file, when a file follower read them."""

    path: str
    data: bytes
    pos: FilePos | None = None


@dataclass(frozen=True)
class CaughtUp:
    """A follower read all that existed when it started; `mtime` is the file's last write
    (None when the file did not exist yet)."""

    path: str
    mtime: float | None


@dataclass(frozen=True)
class EndOfInput:
    """A producer has no more to give (the `run` child exited and its pipes are drained)."""


@dataclass(frozen=True)
class Partial:
    """The unfinished last line of `path`, which has been quiet for a moment: matched ahead
    of its end (see `Engine.feed_partial`)."""

    path: str
    data: bytes
