"""What the block matcher (`core/prefilter.py`) hands the engine: a block cut into
segments, each a line and what the rules say of it, lines passed over, or lines set aside
whole; and the hold where the engine keeps set-aside lines until it needs them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import regex

from hangwatch.core.meaning import HitKind, LineMatch, noise_only
from hangwatch.core.rules import Compiled


@dataclass(frozen=True)
class Entry:
    """One rule pattern as the prefilter scans for it."""

    pid: int  # Hyperscan's id; entries are in the order `core/meaning.line_patterns` lists
    kind: HitKind
    compiled: Compiled[Any]  # the rule and its pattern
    exact: bool

    @property
    def rule(self) -> Any:
        return self.compiled.rule

    @property
    def pattern(self) -> regex.Pattern[str]:
        return self.compiled.pattern


class Plain:
    """Marks a segment's line as one no rule hits (see `Segment`)."""

    def __repr__(self) -> str:
        return "PLAIN"


PLAIN = Plain()
QUIET = LineMatch()  # stands for "noise only": counted, neither progress nor an event


def quiet(match: LineMatch | None) -> LineMatch | None:
    """The block matcher's answer for a line that means `match`: QUIET when only noise
    counts on it (the engine only counts it, and needs not know which noise rule)."""
    if match is None or match.noise is None:
        return match
    return QUIET if noise_only(match) else match


class Pending(NamedTuple):
    """A line of a block that has shown progress, which only STARTs that would change
    nothing (the engine said so), progress rules whose memory is a single value and noise
    rules may hit: it changes nothing but what the progress judge remembers, and only the
    last one of each rule counts for that, so the engine sets it aside in a `Held`.
    `progress`: the progress rules that may hit it. (Named tuples, as Spans and Segment:
    a third the cost of a frozen dataclass.)"""

    raw: bytes
    progress: tuple[Entry, ...]


class Spans(NamedTuple):
    """Lines `data[start:end]` of a block that has shown progress, which the engine sets
    aside whole: nothing but noise, progress rules whose memory is a single value, and STARTs
    that would change nothing (the engine said so) may hit them. `progress`: the progress
    rules that may hit some of them, in the order of their first such line."""

    data: bytes
    start: int
    end: int
    progress: tuple[Entry, ...]


class Matcher(Protocol):
    """What a Held asks of the prefilter when it is released."""

    def matches(self, entry: Entry,
                items: Iterable[bytes | Spans]) -> Iterator[regex.Match[str]]: ...


class Held:
    """Lines set aside (Pending lines and Spans), by progress rule, oldest first."""

    def __init__(self, prefilter: Matcher) -> None:
        self._prefilter = prefilter
        self._lines: dict[int, tuple[Entry, list[bytes | Spans]]] = {}  # by pattern id

    def __bool__(self) -> bool:
        return bool(self._lines)

    def add(self, pending: Pending) -> None:
        for entry in pending.progress:
            self._lines.setdefault(entry.pid, (entry, []))[1].append(pending.raw)

    def add_spans(self, spans: Spans) -> None:
        for entry in spans.progress:
            self._lines.setdefault(entry.pid, (entry, []))[1].append(spans)

    def release(self) -> Iterator[tuple[Any, Iterator[regex.Match[str]]]]:
        """For each progress rule (ProgressRule), the matches of its lines, newest first:
        the judge takes the first it can use. Empties the hold."""
        held, self._lines = self._lines, {}
        for entry, items in held.values():
            yield entry.rule, self._prefilter.matches(entry, reversed(items))


class Segment(NamedTuple):
    """A piece of a block as the prefilter cuts it: `lines` lines passed over (noise only,
    or plain while the engine needs no plain line), then, unless `match` is None, one more
    line: `text` and what `RuleSet.match` says of it, a Pending line the engine sets aside,
    or PLAIN. Or `lines` lines and a `Spans` of them that the engine sets aside
    whole (`text` is then empty)."""

    lines: int
    text: str
    match: LineMatch | Pending | Plain | Spans | None
