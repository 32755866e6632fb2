"""Run work that may hang (a wedged driver, a dead mount, a process stuck in the kernel) so that
the caller never waits past its bound.

Threads are daemons: one stuck in a system call can neither delay the caller nor the
interpreter's exit. Child processes are killed on timeout and reaped in the background, since
a child stuck in uninterruptible sleep cannot be waited for.
"""

from __future__ import annotations

import atexit
import contextlib
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

# Children still running, killed if we exit first (Ctrl-C during a snapshot): a probe that
# outlived us would wait on a wedged driver forever.
_running: set[subprocess.Popen[str]] = set()
_running_lock = threading.Lock()


class Background(Generic[T]):
    """`fn()` running on a daemon thread; `result(timeout)` never waits longer than asked."""

    def __init__(self, fn: Callable[[], T], name: str) -> None:
        self._fn = fn
        self._done = threading.Event()
        self._value: T | None = None
        self._error: str | None = None
        threading.Thread(target=self._run, name=f"hangwatch-{name}", daemon=True).start()

    def _run(self) -> None:
        try:
            self._value = self._fn()
        except Exception as exc:  # a collector's bug becomes data in the report
            self._error = f"{type(exc).__name__}: {exc}"
        finally:
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def result(self, timeout: float) -> tuple[T | None, str | None]:
        """(value, None), or (None, why): it raised, or it is still running after `timeout`."""
        if not self._done.wait(max(0.0, timeout)):
            return None, "timed out"
        return self._value, self._error


@dataclass(frozen=True)
class CommandResult:
    returncode: int | None  # None: killed on timeout, or could not start
    stdout: str
    stderr: str
    timed_out: bool = False
    start_error: str | None = None


def run_command(argv: Sequence[str], timeout: float,
                env: Mapping[str, str] | None = None) -> CommandResult:
    """Run `argv` with its output captured; kill it once `timeout` passes, never hang."""
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, errors="replace",
                                env=dict(env) if env is not None else None)
    except OSError as exc:
        return CommandResult(None, "", "", start_error=str(exc))
    with _running_lock:
        _running.add(proc)
    try:
        out, err = proc.communicate(timeout=max(0.01, timeout))
    except subprocess.TimeoutExpired:
        proc.kill()
        # A child in uninterruptible sleep outlives SIGKILL until the kernel lets go: reap it
        # on a daemon thread instead of waiting here.
        threading.Thread(target=_reap, args=(proc,), name="hangwatch-reap", daemon=True).start()
        return CommandResult(None, "", "", timed_out=True)
    _forget(proc)
    return CommandResult(proc.returncode, out, err)


def _reap(proc: subprocess.Popen[str]) -> None:
    proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    _forget(proc)


def _forget(proc: subprocess.Popen[str]) -> None:
    with _running_lock:
        _running.discard(proc)


@atexit.register
def _kill_running() -> None:
    with _running_lock:
        for proc in _running:
            with contextlib.suppress(OSError):
                proc.kill()
