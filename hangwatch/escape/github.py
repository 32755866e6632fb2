"""Text for GitHub Actions workflow commands (`::error title=...::message`).

The runner reads a command from any output line that starts with `::` (after blanks), so a
message must not hold a line break, and a property must not hold the `,` and `:` that end it.
Outside text is redacted and its control characters shown first.
"""

from __future__ import annotations

from hangwatch.escape.redact import redact_text
from hangwatch.escape.terminal import visible


def command_data(text: str) -> str:
    """The message of a workflow command: `%`, CR and LF escaped the way the runner reads them
    back, other controls shown; it stays on one line."""
    escaped = redact_text(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return visible(escaped)


def command_property(text: str) -> str:
    """A property value (`title=`): also `:` and `,`, which would end it."""
    return command_data(text).replace(":", "%3A").replace(",", "%2C")
