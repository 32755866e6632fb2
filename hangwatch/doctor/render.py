"""The doctor's table for a terminal or a CI log; JSON is `Report.as_dict`."""

from __future__ import annotations

import re
from collections import Counter

from hangwatch.doctor.runner import Report

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
LABELS = {"ok": "ok", "warn": "WARN", "fail": "FAIL", "skip": "skip"}


def printable(text: object) -> str:
    """Environment values and file names may hold escape sequences: show them, never obey."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def table(report: Report) -> list[str]:
    width = max((len(c.id) for c in report.checks), default=10)
    lines = [f"hangwatch doctor on {printable(report.host)} ({report.elapsed_s:g}s)"]
    for check in report.checks:
        lines.append(f"  {LABELS[check.status]:<4}  {check.id:<{width}}  "
                     f"{printable(check.detail)}")
        if check.fix and check.status in ("warn", "fail"):
            lines.append(f"  {'':<4}  {'':<{width}}  fix: {printable(check.fix)}")
    counts: Counter[str] = Counter(c.status for c in report.checks)
    lines.append(", ".join(f"{counts[s]} {name}" for s, name in (
        ("fail", "failed"), ("warn", "warnings"), ("ok", "ok"), ("skip", "skipped"))))
    return lines
