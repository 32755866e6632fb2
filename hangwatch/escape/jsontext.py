"""JSON that is redacted and valid UTF-8 whatever went in: a lone surrogate (an undecodable
byte of a file name, carried by surrogateescape) cannot be encoded, and a strict reader refuses
its `\\udcxx` escape; it becomes U+FFFD, as an undecodable byte of a log line already does.
C1 controls and bidi overrides are written as `\\u` escapes, so `cat` of a JSON line is safe
on a terminal."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from hangwatch.escape.redact import redact_text

_SURROGATE = re.compile("[\ud800-\udfff]")
_RAW_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def clean(value: Any) -> Any:
    """Every string inside nested dicts and lists, keys too, redacted and with lone
    surrogates replaced."""
    if isinstance(value, str):
        return redact_text(_SURROGATE.sub("\ufffd", value))
    if isinstance(value, dict):
        return {clean(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return clean(dataclasses.asdict(value))
    return value


def dumps(value: Any, *, indent: int | None = None) -> str:
    """JSON text of `value` (non-ASCII kept readable): redacted, valid UTF-8, terminal-safe."""
    text = json.dumps(clean(value), ensure_ascii=False, indent=indent, default=str)
    # These can only stand inside strings, where a \u escape means the same character.
    return _RAW_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
