"""Find the time a log line was printed, in the formats training jobs commonly use."""

from __future__ import annotations

import datetime as dt

import regex

# Each pattern fills year (optional), month, day, hour, minute, second, fraction (optional)
# and a zone (optional); the first that matches near the start of the line wins.
_PATTERNS = [
    # ISO 8601 and `2026-01-11 10:00:00,123`, bare or bracketed: [2026-01-11T10:00:00.5Z]
    regex.compile(
        r"(?P<Y>\d{4})-(?P<M>\d\d)-(?P<D>\d\d)[T ](?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)"
        r"(?:[.,](?P<f>\d{1,9}))?(?P<z>Z|[+-]\d\d:?\d\d)?"
    ),
    # glog / absl: I0111 10:00:00.123456
    regex.compile(
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
        groups = m.groupdict()
        year = int(groups["Y"]) if groups.get("Y") else (default_year or dt.date.today().year)
        try:
            stamp = dt.datetime(
                year, int(groups["M"]), int(groups["D"]), int(groups["h"]), int(groups["m"]),
                int(groups["s"]), int((groups.get("f") or "0")[:6].ljust(6, "0")),
                tzinfo=_zone(groups.get("z")),
            )
        except ValueError:
            continue  # digits shaped like a date but not one (e.g. month 13)
        return stamp.timestamp()
    return None


def _zone(text: str | None) -> dt.tzinfo:
    if not text or text == "Z":
        return dt.timezone.utc
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    return dt.timezone(sign * dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
