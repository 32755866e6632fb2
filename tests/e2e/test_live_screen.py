"""The live view on a real terminal (tmux): on a stall the answer is on top and whole, at
80x24 and at 120x40, and log text shows there escaped."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RULES = """\
pack: screen-test
phases:
  - id: weight_push
    title: Weight push to the rollout workers
    start: 'pushing weights to rollout'
    advice:
      - "Phase advice one: the rollout workers did not acknowledge the weights; check each
        worker's log for an exception around the push, and whether all workers joined."
      - "Phase advice two: compare the communicator sizes on the trainer and rollout side."
signals:
  - id: collective_timeout
    severity: error
    match: 'NCCL WARN .*timeout'
    advice:
      - "Signal advice one: a collective timed out; set NCCL_DEBUG=INFO and
        TORCH_NCCL_TRACE_BUFFER_SIZE to find the rank that never joined."
      - "Signal advice two: a rank may have died earlier; look for the first Traceback in
        every rank's log."
      - "Signal advice three: raise the timeout only once you know it is not a deadlock."
"""
LOG = (b"step 1 loss 0.3\npushing weights to rollout (step 118)\n"
       b"[rank3] NCCL WARN watchdog: collective timeout \x1b]0;pwned\x07 after 600000ms\n")

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


class Screen:
    def __init__(self, socket: Path) -> None:
        self.socket = socket

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", str(self.socket), *args], capture_output=True,
                              text=True, check=True, timeout=10).stdout

    def wait_for(self, condition, timeout: float = 30.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while True:
            lines = self.tmux("capture-pane", "-p").rstrip("\n").split("\n")
            if condition(lines) or time.monotonic() > deadline:
                return lines
            time.sleep(0.2)


@pytest.fixture
def stalled_screen(tmp_path: Path) -> Iterator[tuple[Screen, Path]]:
    (tmp_path / "rules.yaml").write_text(RULES)
    log = tmp_path / "train.log"
    log.write_bytes(LOG)
    old = time.time() - 3600
    os.utime(log, (old, old))  # quiet for an hour: the stall fires once it is read
    reports = tmp_path / "reports"
    # COLUMNS/LINES from the test run would pin rich to one size: the pane must decide.
    command = (f"cd {tmp_path} && unset COLUMNS LINES && PYTHONPATH={ROOT} "
               f"{sys.executable} -m hangwatch train.log "
               f"--rules rules.yaml --stall 30s --no-snapshot --report-dir {reports}; "
               f"sleep 60")
    screen = Screen(tmp_path / "tmux.sock")
    screen.tmux("new-session", "-d", "-x", "80", "-y", "24", command)
    try:
        yield screen, reports
    finally:
        screen.tmux("kill-server")


def assert_answer_on_top(lines: list[str], width: int, height: int, reports: Path) -> None:
    text = "\n".join(lines)
    assert len(lines) <= height and all(len(line) <= width for line in lines), text
    assert lines[0].startswith("╭─ STALL"), text
    for expected in ("stalled in      Weight push to the rollout workers [weight_push]",
                     "idle            1h00m (threshold 30s, --stall)",
                     "last completed  train_loop", "report          /",
                     "1. Signal advice one", "2. Signal advice two", "3. Signal advice three",
                     "because signal collective_timeout at train.log:3",
                     "3 more in report.md"):
        assert expected in text, text
    # The report's path may wrap onto the next row: read the panel's rows run together.
    joined = "".join(line.strip("│ ") for line in lines)
    assert f"{reports}/" in joined and "-weight_push" in joined, text
    closing = next(i for i, line in enumerate(lines) if "more in report.md" in line) + 1
    assert lines[closing].startswith("╰"), text  # the panel is whole, not cut
    assert "..." not in [line.strip() for line in lines]  # nothing cropped by rich
    assert "\\x1b]0;pwned\\x07" in text  # the log's escape sequence, shown


@pytest.mark.timeout(90)
def test_stall_answer_fits_80x24_and_120x40(stalled_screen):
    screen, reports = stalled_screen
    lines = screen.wait_for(lambda ls: any("more in report.md" in line for line in ls))
    assert_answer_on_top(lines, 80, 24, reports)
    screen.tmux("resize-window", "-x", "120", "-y", "40")
    lines = screen.wait_for(lambda ls: any(len(line) > 80 for line in ls)
                            and any("events" in line for line in ls))
    assert_answer_on_top(lines, 120, 40, reports)
    assert any("╭─ events" in line for line in lines), "\n".join(lines)
