"""Durations as users write them: `90`, `90s`, `10m`, `1h`, `1h30m`, `1.5m`."""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?", re.IGNORECASE)
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str | int | float) -> float:
    """Return seconds; raise ValueError with a readable message when `text` is not a duration."""
    if isinstance(text, bool):
        raise ValueError(f"not a duration: {text!r}")
    if isinstance(text, (int, float)):
        if text <= 0:
            raise ValueError(f"duration must be positive: {text!r}")
        return float(text)
    raw = text.strip()
    total, pos = 0.0, 0
    while pos < len(raw):
        m = _PART.match(raw, pos)
        if not m or m.end() == pos:
            raise ValueError(f"not a duration: {text!r} (use e.g. 90, 90s, 10m, 1h)")
        unit = (m.group(2) or "s").lower()
        if m.group(2) is None and m.end() != len(raw):
            raise ValueError(f"not a duration: {text!r} (use e.g. 90, 90s, 10m, 1h)")
        total += float(m.group(1)) * _SECONDS[unit]
        pos = m.end()
        while pos < len(raw) and raw[pos] == " ":
            pos += 1
    if not raw or total <= 0:
        raise ValueError(f"duration must be positive: {text!r}")
    return total


def format_duration(seconds: float) -> str:
    """Short human form: 45s, 12m03s, 2h05m."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"
