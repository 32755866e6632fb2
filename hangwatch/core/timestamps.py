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
    # An ISO stamp holds a `-` four characters in: it begins no earlier than the first `-`
    # less four (`re` would try every position of a prefix such as "(WorkerDict pid=3002) ").
    dash = head.find("-")
    iso = _PATTERNS[0].search(head, max(0, dash - 4)) if dash >= 0 else None
    if iso is not None:
        found = _iso(iso)
        if found is not None:
            return found
    glog = _PATTERNS[1].match(head)
    if glog is not None:
        month, day_, hour_, minute_, second_, fraction = glog.groups()
        year = str(default_year or dt.date.today().year)
        return _stamp(_day(year, month, day_, None), hour_, minute_, second_, fraction)
    return None


def _iso(found: re.Match[str]) -> float | None:
    """Epoch seconds of an ISO stamp; None for a time that is none. Its minute's start is
    kept by the digits as printed (a log's stamps share a few minutes): the rest of a stamp
    is its seconds and fraction."""
    y, month, day_, hour_, minute_, second_, fraction, zone = found.groups()
    key = (found.string[found.start():found.start() + 16], zone)  # `2026-01-11 10:00`
    if key in _MINUTES:
        minute = _MINUTES[key]
    else:
        if len(_MINUTES) >= 4096:
            _MINUTES.clear()
        minute = _MINUTES[key] = _minute(_day(y, month, day_, zone), hour_, minute_)
    return _within(minute, second_, fraction)


def _minute(day: int | None, hour_: str, minute_: str) -> int | None:
    """Microseconds from the epoch to a minute's start on `day`; None for one that is none."""
    hour, minute = int(hour_), int(minute_)
    if day is None or hour > 23 or minute > 59:
        return None
    return day + (hour * 60 + minute) * 60_000_000


def _within(minute: int | None, second_: str, fraction: str | None) -> float | None:
    """Epoch seconds of a time in the minute starting `minute` microseconds from the epoch;
    None for a minute or a second that is none."""
    second = int(second_)
    if minute is None or second > 59:
        return None
    micro = int(fraction[:6].ljust(6, "0")) if fraction else 0
    # Whole microseconds divided once: the float datetime.timestamp() gives.
    return (minute + second * 1_000_000 + micro) / 1_000_000


def _stamp(day: int | None, hour_: str, minute_: str, second_: str,
           fraction: str | None) -> float | None:
    """Epoch seconds of a time on `day` (its start in microseconds); None for a date or a
    time that is none (digits shaped like one, e.g. month 13: datetime refuses them)."""
    return _within(_minute(day, hour_, minute_), second_, fraction)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MIDNIGHTS: dict[tuple[str, str, str, str | None], int | None] = {}  # few days a log
_MINUTES: dict[tuple[str, str | None], int | None] = {}  # by the stamp's digits up to its minute


def _day(year: str, month: str, day: str, zone: str | None) -> int | None:
    """Microseconds from the epoch to the day's start in `zone`; None for a date that is
    none. Kept by the digits as printed: building a datetime for each stamp costs more than
    the rest of reading it."""
    key = (year, month, day, zone)
    if key in _MIDNIGHTS:
        return _MIDNIGHTS[key]
    try:
        start = dt.datetime(int(year), int(month), int(day), tzinfo=_zone(zone))
        found: int | None = (start - _EPOCH) // dt.timedelta(microseconds=1)
    except ValueError:
        found = None
    if len(_MIDNIGHTS) >= 4096:
        _MIDNIGHTS.clear()
    _MIDNIGHTS[key] = found
    return found


def _zone(text: str | None) -> dt.tzinfo:
    if not text or text == "Z":
        return dt.timezone.utc
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    return dt.timezone(sign * dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
