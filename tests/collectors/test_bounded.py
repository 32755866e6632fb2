"""Bounded work: a thread or a child that hangs never holds the caller past its bound."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from hangwatch.collectors.bounded import Background, run_command


def test_command_that_hangs_is_killed_at_its_timeout():
    started = time.monotonic()
    result = run_command([sys.executable, "-c", "import time; time.sleep(60)"], 0.5)
    assert result.timed_out and result.returncode is None
    assert time.monotonic() - started < 2


def test_command_output_and_status_are_returned():
    result = run_command([sys.executable, "-c", "import sys; print('out'); "
                                                "print('err', file=sys.stderr); sys.exit(3)"], 10)
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")


def test_command_that_cannot_start_is_data():
    result = run_command(["/nonexistent/tool"], 1)
    assert result.returncode is None and "No such file" in result.start_error


def test_background_returns_value_error_or_timeout():
    assert Background(lambda: 42, "t").result(5) == (42, None)

    def boom() -> None:
        raise ValueError("bad")
    assert Background(boom, "t").result(5) == (None, "ValueError: bad")
    never = threading.Event()
    job = Background(never.wait, "t")
    started = time.monotonic()
    assert job.result(0.1) == (None, "timed out")
    assert time.monotonic() - started < 0.5
    never.set()


def test_children_still_running_are_killed_when_we_exit():
    code = ("import threading, time\n"
            "from hangwatch.collectors import bounded\n"
            "threading.Thread(target=bounded.run_command, args=(['sleep', '60'], 60),"
            " daemon=True).start()\n"
            "time.sleep(0.3)\n"
            "print(next(iter(bounded._running)).pid, flush=True)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=30, cwd=Path(__file__).resolve().parents[2])
    sleeper = int(done.stdout)
    time.sleep(0.2)
    assert not psutil.pid_exists(sleeper) or psutil.Process(sleeper).status() == "zombie"
