"""Does a line that a progress rule matched really advance the job?"""

from __future__ import annotations

from collections.abc import Iterable

import regex

from hangwatch.core.model import ProgressRule

_NUMBER = regex.compile(r"[-+]?\d+(?:\.\d+)?")
_STAMP = regex.compile(
    r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?|\b\d\d:\d\d:\d\d(?:\.\d+)?"
)


class ProgressJudge:
    """Remembers, per rule, the last counter value or heartbeat text it saw."""

    def __init__(self) -> None:
        self._counters: dict[tuple[str, tuple[str, ...]], float] = {}
        self._beats: dict[str, str] = {}

    def advances(self, hits: Iterable[tuple[ProgressRule, regex.Match[str]]]) -> bool:
        """True when any hit advances; every hit updates its memory either way."""
        advanced = False
        for rule, match in hits:
            if rule.counter is not None:
                advanced |= self._counter_grew(rule, match)
            else:
                advanced |= self._heartbeat_changed(rule, match)
        return advanced

    def _counter_grew(self, rule: ProgressRule, match: regex.Match[str]) -> bool:
        assert rule.counter is not None
        found = _NUMBER.search(match.group(rule.counter) or "")
        if found is None:
            return False
        value = float(found.group())
        # Other named groups tell counters apart ("train" vs "validation" split).
        key = (rule.id, tuple(str(v) for k, v in sorted(match.groupdict().items())
                              if k != rule.counter))
        previous = self._counters.get(key)
        self._counters[key] = value
        # Equal is a repeat; lower is a new pass (next epoch, a second `Map`), so it counts.
        return previous is None or value != previous

    def _heartbeat_changed(self, rule: ProgressRule, match: regex.Match[str]) -> bool:
        text = match.string
        # Blank out the named groups (elapsed times, counts that tick) and any timestamp.
        spans = sorted(match.span(name) for name in match.groupdict() if match.start(name) >= 0)
        for start, end in reversed(spans):
            text = text[:start] + "#" + text[end:]
        key = _STAMP.sub("#", text)
        previous = self._beats.get(rule.id)
        self._beats[rule.id] = key
        return previous != key
