"""`hangwatch run` against a job whose output is hostile in size: one 100 MB line with no
newline, or a flood of lines. hangwatch's memory stays bounded and the log keeps every byte."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
MB = 1 << 20
PEAK_LIMIT = 150 * MB  # hangwatch itself is about 35 MiB; any copy of the output would show


def run_measured(tmp_path: Path, script: str) -> tuple[int, int]:
    """Run `hangwatch run` on the script; return its exit status and peak RSS in bytes."""
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent(script))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "hangwatch", "run", "--log", str(tmp_path / "job.log"),
         "--no-snapshot", "--stall", "60s", "--report-dir", str(tmp_path / "r"), "--",
         sys.executable, str(job)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    watched = psutil.Process(proc.pid)
    peak = 0
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            peak = max(peak, watched.memory_info().rss)
        time.sleep(0.005)
    if proc.poll() is None:
        proc.kill()
    return proc.wait(), peak


@pytest.mark.timeout(150)
def test_one_100mb_line_without_newline_is_logged_whole_in_bounded_memory(tmp_path):
    status, peak = run_measured(tmp_path, """
        import os
        chunk = b"x" * (1 << 20)
        for _ in range(100):
            os.write(1, chunk)
        os.write(2, b"an error line meanwhile\\n")
        os.write(1, b"y" * 1000)  # still no newline: the job ends mid-line
    """)
    assert status == 0
    assert peak < PEAK_LIMIT, f"peak RSS {peak / MB:.0f} MiB"
    log = tmp_path / "job.log"
    assert log.stat().st_size == 100 * MB + 1000 + 1 + len(b"an error line meanwhile\n")
    with log.open("rb") as fh:
        fh.seek(-1001, os.SEEK_END)
        assert fh.read() == b"y" * 1000 + b"\n"


@pytest.mark.timeout(150)
def test_a_flood_of_output_keeps_memory_bounded_and_loses_no_line(tmp_path):
    status, peak = run_measured(tmp_path, """
        import sys
        line = "step %d loss 0.5 " + "z" * 80 + "\\n"
        out = sys.stdout
        for i in range(400_000):
            out.write(line % i)
    """)
    assert status == 0
    assert peak < PEAK_LIMIT, f"peak RSS {peak / MB:.0f} MiB"
    with (tmp_path / "job.log").open("rb") as fh:
        count = sum(1 for _ in fh)
    assert count == 400_000
