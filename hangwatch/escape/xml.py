"""Text for XML 1.0 (JUnit results): characters XML cannot hold at all (most C0 controls, lone
surrogates, U+FFFE/U+FFFF) are shown escaped instead of making the file unreadable; `&`, `<`,
`]]>` and quotes are the serializer's job (ElementTree escapes them, and writes no CDATA)."""

from __future__ import annotations

from hangwatch.escape.terminal import safe, safe_lines

_NOT_XML = str.maketrans({"\ufffe": "\\ufffe", "\uffff": "\\uffff"})


def xml_text(text: str) -> str:
    """One line of outside text for an attribute or element."""
    return safe(text).translate(_NOT_XML)


def xml_block(text: str) -> str:
    """Outside text of several lines (a failure message, a log tail)."""
    return safe_lines(text).translate(_NOT_XML)
