"""`python -m hangwatch ...` as a real child process of this checkout, its output lines read
on threads with the time each arrived."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def child_env() -> dict[str, str]:
    return {**os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def hangwatch(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hangwatch", *args], capture_output=True,
                          text=True, timeout=timeout, env=child_env(), cwd=ROOT)


class Hangwatch:
    def __init__(self, *args: str, sigint_ignored: bool = False) -> None:
        """`sigint_ignored`: started as a script's background job is, SIGINT ignored."""
        ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored \
            else None
        self.proc = subprocess.Popen([sys.executable, "-m", "hangwatch", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=child_env(), cwd=ROOT, preexec_fn=ignore)
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        for stream, sink in ((self.proc.stdout, self.stdout), (self.proc.stderr, self.stderr)):
            threading.Thread(target=self._read, args=(stream, sink), daemon=True).start()

    def _read(self, stream: Any, sink: list[str]) -> None:
        for line in stream:
            sink.append(line)
            if sink is self.stdout:
                self.lines.put((time.monotonic(), line))

    def next_event(self, kind: str, timeout: float = 15.0) -> tuple[float, dict[str, Any]]:
        """The next JSON line with `event == kind`, and when it arrived."""
        deadline = time.monotonic() + timeout
        while True:
            arrived, line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            event = json.loads(line)
            if event.get("event") == kind:
                return arrived, event

    def stop(self, sig: int = signal.SIGINT, timeout: float = 20.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def output(self) -> str:
        return "".join(self.stdout) + "".join(self.stderr)
