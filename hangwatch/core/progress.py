"""Does a line that a progress rule matched really advance the job?"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import regex

from hangwatch.core.model import ProgressRule

_NUMBER = regex.compile(r"[-+]?\d+(?:\.\d+)?")
_STAMP = regex.compile(
    r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?|\b\d\d:\d\d:\d\d(?:\.\d+)?"
)


@dataclass
class ProgressJudge:
    """Remembers, per rule, the last counter value or heartbeat text it saw. Two judges
    are equal when they remember the same."""

    _counters: dict[tuple[str, tuple[str, ...]], float] = field(default_factory=dict)
    _beats: dict[str, str] = field(default_factory=dict)

    def advances(self, hits: Iterable[tuple[ProgressRule, regex.Match[str]]]) -> bool:
        """True when any hit advances; every hit updates its memory either way."""
        advanced = False
        for rule, match in hits:
            if rule.counter is not None:
                advanced |= self._counter_grew(rule, match)
            else:
                advanced |= self._heartbeat_changed(rule, match)
        return advanced

    def remember(self, rule: ProgressRule, match: regex.Match[str]) -> bool:
        """Take in a hit as `advances` does, without judging it; False when it leaves the
        memory as it was (a counter group without a number)."""
        if rule.counter is None:
            self._beats[rule.id] = _beat(match)
            return True
        counted = _count(rule, match)
        if counted is not None:
            self._counters[counted[0]] = counted[1]
        return counted is not None

    def _counter_grew(self, rule: ProgressRule, match: regex.Match[str]) -> bool:
        counted = _count(rule, match)
        if counted is None:
            return False
        key, value = counted
        previous = self._counters.get(key)
        self._counters[key] = value
        # Equal is a repeat; lower is a new pass (next epoch, a second `Map`), so it counts.
        return previous is None or value != previous

    def _heartbeat_changed(self, rule: ProgressRule, match: regex.Match[str]) -> bool:
        key = _beat(match)
        previous = self._beats.get(rule.id)
        self._beats[rule.id] = key
        return previous != key


def _count(rule: ProgressRule, match: regex.Match[str]) -> tuple[tuple[str, tuple[str, ...]],
                                                                   float] | None:
    """The counter's key and value, or None when its group holds no number."""
    assert rule.counter is not None
    found = _NUMBER.search(match.group(rule.counter) or "")
    if found is None:
        return None
    # Other named groups tell counters apart ("train" vs "validation" split).
    others = _others(match.re, rule.counter)
    key = (rule.id, tuple(str(match.group(name)) for name in others) if others else ())
    return key, float(found.group())


_OTHERS: dict[tuple[regex.Pattern[str], str], tuple[str, ...]] = {}  # few progress rules


def _others(pattern: regex.Pattern[str], counter: str) -> tuple[str, ...]:
    """The names of a pattern's groups other than its counter, in order of name: kept by
    pattern, since sorting a match's groups for each counted line costs more than the
    rest of counting it."""
    found = _OTHERS.get((pattern, counter))
    if found is None:
        if len(_OTHERS) >= 1024:  # rule sets reloaded many times: memory stays flat
            _OTHERS.clear()
        found = _OTHERS[(pattern, counter)] = tuple(
            sorted(name for name in pattern.groupindex if name != counter))
    return found


def _beat(match: regex.Match[str]) -> str:
    """The heartbeat line with its named groups (elapsed times, counts that tick) and any
    timestamp blanked out: what must change for a beat to be progress."""
    text = match.string
    spans = sorted(match.span(name) for name in match.groupdict() if match.start(name) >= 0)
    for start, end in reversed(spans):
        text = text[:start] + "#" + text[end:]
    return _STAMP.sub("#", text)
