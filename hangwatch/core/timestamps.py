"""Find the time a log line was printed, in the formats training jobs commonly use."""

from __future__ import annotations

import datetime as dt
import re

# Each pattern fills year (optional), month, day, hour, minute, second, fraction (optional)
# and a zone (optional), in that order (read by position); the first that matches near the
# start of the line wins. `re`, not `regex`: a third faster on these, and this runs on
# every line that moves a phase.
_PATTERNS = [
    # ISO 8601 and `2026-01-11 10:00:00,123`, bare or bracketed: [2026-01-11T10:00:00.5Z]
    re.compile(
        r"(?P<Y>\d{4})-(?P<M>\d\d)-(?P<D>\d\d)[T ](?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)"
        r"(?:[.,](?P<f>\d{1,9}))?(?P<z>Z|[+-]\d\d:?\d\d)?"
    ),
    # glog / absl: I0111 10:00:00.123456
    re.compile(
        r"^[IWEF](?P<M>\d\d)(?P<D>\d\d) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)(?:\.(?P<f>\d{1,9}))?"
    ),
]
_SEARCH_PREFIX = 64  # timestamps sit at the start of a line, maybe after a prefix like "(pid=1) "


def parse_stamp(text: str, *, default_year: int | None = None) -> float | None:
    """Epoch seconds of the first timestamp near the start of `text`, or None.

    Times without a zone are read as UTC: only differences between stamps are used, and
    those do not depend on the zone.
    """
    head = text[:_SEARCH_PREFIX]
    for pattern in _PATTERNS:
        m = pattern.search(head)
        if m is None:
            continue
        found = m.groups()  # by position: a groupdict costs more
        if len(found) == 8:
            y, month, day_, hour_, minute_, second_, fraction, zone = found
        else:
            month, day_, hour_, minute_, second_, fraction = found
            y = zone = None
        year = int(y) if y else (default_year or dt.date.today().year)
        try:
            day = _midnight_us(year, int(month), int(day_), zone)
        except ValueError:
            continue  # digits shaped like a date but not one (e.g. month 13)
        hour, minute, second = int(hour_), int(minute_), int(second_)
        if hour > 23 or minute > 59 or second > 59:
            continue  # as datetime refuses them
        micro = int((fraction or "0")[:6].ljust(6, "0"))
        # Whole microseconds divided once: the float datetime.timestamp() gives.
        return (day + ((hour * 60 + minute) * 60 + second) * 1_000_000 + micro) / 1_000_000
    return None


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MIDNIGHTS: dict[tuple[int, int, int, str | None], int] = {}  # a log spans few days


def _midnight_us(year: int, month: int, day: int, zone: str | None) -> int:
    """Microseconds from the epoch to the day's start in `zone`; ValueError for a date
    that is none. Kept by day: building a datetime for each stamp costs more than the
    rest of reading it."""
    key = (year, month, day, zone)
    found = _MIDNIGHTS.get(key)
    if found is None:
        start = dt.datetime(year, month, day, tzinfo=_zone(zone))
        if len(_MIDNIGHTS) >= 4096:
            _MIDNIGHTS.clear()
        found = _MIDNIGHTS[key] = (start - _EPOCH) // dt.timedelta(microseconds=1)
    return found


def _zone(text: str | None) -> dt.tzinfo:
    if not text or text == "Z":
        return dt.timezone.utc
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    return dt.timezone(sign * dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
