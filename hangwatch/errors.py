"""Exit statuses and the errors a user can meet, each carrying where it happened."""

from __future__ import annotations

import enum


class ExitStatus(enum.IntEnum):
    OK = 0
    CHECK_FAILED = 1  # doctor: a check failed (or, with --compare, nodes disagree)
    USAGE = 2
    STALL = 3
    INTERRUPTED = 130
    READER_GONE = 141  # 128 + SIGPIPE: what a shell reports for `cat` when `head` has quit
    TERMINATED = 143


class HangwatchError(Exception):
    """An error shown to the user as a message, never as a traceback."""

    status: ExitStatus = ExitStatus.USAGE


class ConfigError(HangwatchError):
    """A problem in a rule file: `file:line: rule <id>: message`."""

    def __init__(self, message: str, *, file: str = "", line: int = 0, rule: str = "") -> None:
        self.file = file
        self.line = line
        self.rule = rule
        self.message = message
        super().__init__(self.render())

    def render(self) -> str:
        where = self.file
        if self.line:
            where = f"{where}:{self.line}"
        prefix = f"{where}: " if where else ""
        if self.rule:
            prefix += f"rule {self.rule}: "
        return prefix + self.message


class ConfigErrors(HangwatchError):
    """Every problem found while validating rule files, reported together."""

    def __init__(self, errors: list[ConfigError]) -> None:
        self.errors = errors
        super().__init__("\n".join(e.render() for e in errors))
