"""Text for Markdown (report.md, the GitHub step summary): it cannot close the code span or
fence it sits in, split a table row, start HTML, or turn into links and emphasis.

Each function redacts secrets and shows control characters (see `terminal`) first, since a
report is also read with `cat`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from hangwatch.escape.terminal import safe, visible

_BACKTICKS = re.compile(r"`+")
# The ASCII punctuation that starts Markdown or HTML within a line; CommonMark lets any of it be
# written with a backslash to mean itself.
# `_` between letters or digits (all_reduce) cannot open or close emphasis: left as it is.
_INLINE_SPECIAL = re.compile(r"([\\`*\[\]<>|~&#!]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")


def _longest_run(text: str) -> int:
    return max((len(m) for m in _BACKTICKS.findall(text)), default=0)


def code(text: str) -> str:
    """An inline code span holding `text` on one line, with a backtick fence longer than any
    run of backticks inside it."""
    body = safe(text)
    if not body:
        return "` `"
    ticks = "`" * (_longest_run(body) + 1)
    pad = " " if body[0] in "` " or body[-1] in "` " else ""
    return f"{ticks}{pad}{body}{pad}{ticks}"


def inline(text: str) -> str:
    """Outside text within a line of prose: read as the characters it is."""
    return _INLINE_SPECIAL.sub(r"\\\1", safe(text))


def quoting(text: str) -> str:
    """A sentence of hangwatch's own that quotes outside text between backticks ("rank 2 is in
    `load_batch`"): each quoted piece becomes a code span, the rest is read as the characters
    it is. Anything else (unbalanced backticks, an empty quote, backticks inside a quote)
    quotes nothing: the whole is read as characters."""
    parts = text.split("`")
    if len(parts) % 2 == 0 or not all(parts[1::2]):
        return inline(text)
    return "".join(code(part) if i % 2 else inline(part) for i, part in enumerate(parts))


def authored(text: str) -> str:
    """Text a rule pack wrote (advice, titles): Markdown as its author meant it; only control
    characters are shown, since a pack may come from anywhere too."""
    return visible(text)


def cell(text: object) -> str:
    """A table cell of outside text (or a number): `|` cannot split the row."""
    return inline("" if text is None else str(text))


def code_cell(text: str) -> str:
    """A code span inside a table cell; GitHub splits cells at `|` even inside code."""
    return code(text).replace("|", "\\|")


def fence(lines: Iterable[str], info: str = "text") -> list[str]:
    """A fenced code block of outside lines: the fence is longer than any backtick run they
    hold, so no line can end it."""
    body = [safe(line) for line in lines]
    ticks = "`" * max(3, max((_longest_run(line) for line in body), default=0) + 1)
    return [f"{ticks}{info}", *body, ticks]
