"""Timing, statistics and table helpers shared by the benchmarks."""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


@dataclass(frozen=True)
class Timed:
    wall: float
    cpu: float
    max_rss_mb: float
    rc: int
    stdout: str
    stderr: str


def run_timed(argv: Sequence[str], *, env: dict[str, str] | None = None,
              timeout: float = 3600) -> Timed:
    """Run a command to completion; wall time, CPU time and peak RSS of that child alone."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=full_env, cwd=REPO)
        killer = threading.Timer(timeout, proc.kill)
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)  # the child's own rusage, unlike Popen
        finally:
            killer.cancel()
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Timed(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
                     proc.returncode, out.read().decode("utf-8", "replace"),
                     err.read().decode("utf-8", "replace"))


@dataclass
class Series:
    """Repeated measurements of one thing."""

    values: list[float] = field(default_factory=list)

    def add(self, value: float) -> None:
        self.values.append(value)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    def text(self, unit: str = "s", digits: int = 2) -> str:
        if not self.values:
            return "-"
        med, lo, hi = self.median, min(self.values), max(self.values)
        if len(self.values) == 1:
            return f"{med:.{digits}f} {unit}"
        return f"{med:.{digits}f} {unit} ({lo:.{digits}f}-{hi:.{digits}f})"


@dataclass
class Row:
    bench: str
    measure: str
    value: str
    reference: str = ""
    ratio: str = ""
    goal: str = ""
    ok: bool | None = None  # None: reported, no goal


def render(rows: Sequence[Row]) -> str:
    head = ("benchmark", "measure", "hangwatch", "reference", "ratio", "goal", "")
    cells = [head] + [(r.bench, r.measure, r.value, r.reference, r.ratio, r.goal,
                       {True: "ok", False: "MISSED", None: ""}[r.ok]) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    lines = ["| " + " | ".join(c[i].ljust(widths[i]) for i in range(len(head))) + " |"
             for c in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def note(text: str) -> None:
    print(f"  .. {text}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `timeout`."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
