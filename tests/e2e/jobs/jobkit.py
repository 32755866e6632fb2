"""What the end-to-end job scripts share: they import it from their own folder, which is on
sys.path when a script runs (and in the processes multiprocessing spawns from it)."""

from __future__ import annotations

import os
import socket


def record_pid() -> None:
    """Add this process to $JOB_PIDS_FILE, so that the test can check it was ended."""
    path = os.environ.get("JOB_PIDS_FILE")
    if path:
        with open(path, "a") as fh:
            fh.write(f"{os.getpid()}\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
