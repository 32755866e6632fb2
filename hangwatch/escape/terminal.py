"""Text for a terminal: nothing in it can move the cursor, retitle the window, clear the
screen, ring the bell, hide text behind backspaces or reorder it (bidi overrides).

Every C0 control but tab, DEL, every C1 control, the Unicode bidi controls and lone
surrogates (undecodable bytes carried by surrogateescape) are shown as `\\xNN` / `\\uNNNN`.
"""

from __future__ import annotations

import re

from rich.text import Text

from hangwatch.escape.redact import redact_text

_OTHER = "\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE = re.compile(f"[\x00-\x08\x0a-\x1f{_OTHER}]")
_UNSAFE_KEEP_NEWLINES = re.compile(f"[\x00-\x08\x0b-\x1f{_OTHER}]")


def _show(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """One line of text with every control character shown, not obeyed (tab kept)."""
    return _UNSAFE.sub(_show, text)


def visible_lines(text: str) -> str:
    """Like `visible`, keeping newlines: for stacks and other text of several lines."""
    return _UNSAFE_KEEP_NEWLINES.sub(_show, text)


def safe(text: str) -> str:
    """Outside text for one terminal line: secrets redacted, controls shown."""
    return visible(redact_text(text))


def safe_lines(text: str) -> str:
    return visible_lines(redact_text(text))


def rich_text(text: str, style: str = "") -> Text:
    """A rich Text of outside text: never parsed as markup (`[bold]` stays literal)."""
    return Text(safe(text), style=style)
