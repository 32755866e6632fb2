"""`--history FILE`: phase durations per job, kept across runs, so a phase running well past
its usual time is called `slow` before the stall threshold (core/history.py judges)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

from hangwatch.core.events import Event, Incident, Notice, PhaseEvent
from hangwatch.core.history import History
from hangwatch.errors import HangwatchError
from hangwatch.reporters.base import View
from hangwatch.storage.files import write_atomic

VERSION = 1


def load_history(path: Path, job: str) -> History:
    """The job's history from `path` (empty when the file does not exist yet)."""
    jobs = _read(path)
    try:
        return History.from_dict(jobs.get(job, {"durations": {}}))
    except ValueError:
        raise HangwatchError(f"{path}: job {job!r}: not a hangwatch history") from None


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HangwatchError(f"cannot read the history {path}: {exc}") from None
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(
            data.get("jobs"), dict):
        raise HangwatchError(f"{path}: not a hangwatch history file (version {VERSION})")
    return dict(data["jobs"])


class HistoryWriter:
    """Writes the job's durations back each time a phase or step completes: a run that is
    killed keeps what it learned. Other jobs in the same file are kept as they are."""

    def __init__(self, path: Path, job: str, history: History, err: TextIO) -> None:
        self.path = path
        self.job = job
        self.history = history
        self._err = err
        self._failed = False  # said once: a full disk must not flood the output

    def notice(self, notice: Notice) -> None:
        """Nothing to learn from a file's notices."""

    def event(self, event: Event) -> None:
        if isinstance(event, PhaseEvent) and event.state == "completed":
            self._save()

    def incident(self, incident: Incident) -> None:
        """Stalls teach no duration: the phase never completed."""

    def refresh(self, view: View) -> None:
        """Nothing to draw."""

    def close(self) -> None:
        self._save()

    def _save(self) -> None:
        try:
            jobs = _read(self.path)
        except HangwatchError:
            jobs = {}  # damaged since we read it: ours is the one to keep
        jobs[self.job] = self.history.to_dict()
        data = json.dumps({"version": VERSION, "jobs": jobs}, indent=1).encode()
        try:
            write_atomic(self.path, data)
        except OSError as exc:
            if not self._failed:
                self._failed = True
                print(f"hangwatch: cannot write the history {self.path}: "
                      f"{exc.strerror or exc}", file=self._err)
