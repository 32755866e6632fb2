"""`blind` and `readable` as every output shows them."""

from __future__ import annotations

import io
import json

from hangwatch.core.events import BlindEvent, ReadableEvent
from hangwatch.reporters.jsonl import JsonReporter
from hangwatch.reporters.plain import PlainReporter


def test_blind_and_readable_in_json_lines_carry_the_watch():
    out = io.StringIO()
    reporter = JsonReporter(out, {"watch": "gkd"})
    reporter.event(BlindEvent("/l/rank*.log", "glob", "matches no file any more", 601.0, 5.0))
    reporter.event(ReadableEvent("/l/rank*.log", "glob", 700.0, 6.0))
    blind, readable = (json.loads(line) for line in out.getvalue().splitlines())
    assert blind == {"event": "blind", "watch": "gkd", "what": "glob", "path": "/l/rank*.log",
                     "reason": "matches no file any more", "blind_s": 601.0, "time": 5.0}
    assert readable == {"event": "readable", "watch": "gkd", "what": "glob",
                        "path": "/l/rank*.log", "blind_s": 700.0, "time": 6.0}


def test_blind_in_plain_text_says_what_and_for_how_long():
    text = io.StringIO()
    PlainReporter(text, now=lambda: 0, prefix="[gkd] ").event(
        BlindEvent("/l/a.log", "log", "'/l/a.log' has disappeared", 601.0, 5.0))
    assert "[gkd] BLIND: cannot see log /l/a.log for 10m01s" in text.getvalue()
