"""Real child processes that really block, for the collectors to find and read."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import psutil
import pytest

from hangwatch.collectors.stacks import PTRACE_HINT

# Writes one line to the log (or stdout with "-"), then blocks in a named function on a pipe
# nobody writes to: the stack must name `wait_for_weights`.
BLOCKED_CHILD = """
import os, sys
def wait_for_weights():
    r, w = os.pipe()
    os.read(r, 1)
out = sys.stdout if sys.argv[1] == "-" else open(sys.argv[1], "a", buffering=1)
out.write("step 1 done\\n")
out.flush()
wait_for_weights()
"""

# Starts a child that exits at once and is never reaped: a zombie, until this parent goes.
ZOMBIE_PARENT = """
import os, sys, time
pid = os.fork()
if pid == 0:
    os._exit(0)
print(pid, flush=True)
time.sleep(60)
"""


class Jobs:
    """Children started by a test; all killed (with their process groups) at teardown."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen[str]] = []

    def blocked_python(self, log: Path | str, *, env: Mapping[str, str] | None = None,
                       args: Sequence[str] = ()) -> subprocess.Popen[str]:
        script = self.tmp_path / "child.py"
        script.write_text(BLOCKED_CHILD)
        proc = self.start([sys.executable, str(script), str(log), *args], env=env)
        if str(log) != "-":
            wait_for_text(Path(log), "step 1 done")
        return proc

    def start(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              **kwargs: object) -> subprocess.Popen[str]:
        full_env = {**os.environ, **(env or {})}
        proc = subprocess.Popen(list(argv), env=full_env, text=True, start_new_session=True,
                                **kwargs)  # type: ignore[call-overload]
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        for proc in self.procs:
            # Children that left the group (torchrun starts each worker in a session of its
            # own) are found before their parent dies and they are handed to init.
            try:
                strays = psutil.Process(proc.pid).children(recursive=True)
            except psutil.Error:
                strays = []
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            for stray in strays:
                with contextlib.suppress(psutil.Error):
                    stray.kill()
            proc.wait(timeout=10)
            psutil.wait_procs(strays, timeout=10)


def wait_for_text(path: Path, text: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            time.sleep(0.1)  # let the writer reach its blocking call
            return
        time.sleep(0.02)
    raise AssertionError(f"{text!r} never appeared in {path}")


def wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition never became true")


def stack_of(process: dict) -> str:
    """The stack a snapshot took, or skip the test where this machine forbids ptrace (a CI
    runner with kernel.yama.ptrace_scope=1): that is the machine's policy, not a bug."""
    if process.get("stack") is None and (process.get("stack_error") or process.get(
            "error") or "").startswith(PTRACE_HINT):
        pytest.skip("py-spy may not attach to processes on this machine")
    return process.get("stack") or ""
