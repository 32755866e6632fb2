"""Run a job in its own session and process group, know every process it ever started, and end
all of them on demand. Its output comes through pipes (sources/pipes.py reads them).

Its process tree is polled about once a
second and every process of it ever seen is remembered, so a grandchild that called setsid (and
left the process group) is still signalled at the end; with `adopt_orphans()` even a daemon
whose parent exited before any poll comes back to us as our child.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO, NamedTuple, TextIO, cast

import psutil

from hangwatch.collectors.discover import ProcFS, descendants
from hangwatch.core.clock import Clock, SystemClock
from hangwatch.errors import HangwatchError
from hangwatch.sources.pipes import Echo, JobPipes, Stream
from hangwatch.storage.files import discard_output

POLL_TREE_S = 1.0
KILL_WAIT_S = 5.0  # after SIGKILL, only a process stuck in the kernel takes longer
DRAIN_WAIT_S = 5.0  # output still in the pipes after every writer is gone
NOT_FOUND = 127  # the statuses a shell gives for a command it cannot find or cannot execute
NOT_EXECUTABLE = 126
_PR_SET_CHILD_SUBREAPER = 36


class Stopped(NamedTuple):
    terminated: int  # processes alive when the job was told to stop (SIGTERM)
    killed: int  # of those, still alive after the grace period (SIGKILL)


class JobStartError(HangwatchError):
    """The command could not be started; `exit_status` follows the shell (127 or 126)."""

    def __init__(self, message: str, exit_status: int) -> None:
        super().__init__(message)
        self.exit_status = exit_status


def exit_status(returncode: int) -> int:
    """Popen's returncode as a shell reports it: death by signal N is 128+N."""
    return 128 - returncode if returncode < 0 else returncode


class Terminal:
    """Our stdout and stderr, shared by the job's bytes (echoed unchanged) and hangwatch's own
    lines. Those always start on a line of their own: the job's last write often ends mid-line
    (tqdm draws its bar on stderr with no newline), and an event glued to it would be lost to a
    reader that takes one JSON object a line. A stream whose reader went away (`| head`) is
    dropped, and the job goes on: the log keeps every byte."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self._targets: dict[Stream, TextIO] = {"stdout": out, "stderr": err}
        self._mid_line: dict[Stream, bool] = {"stdout": False, "stderr": False}
        self._gone: set[Stream] = set()
        self._lock = threading.Lock()  # the job's bytes come from the reader thread

    def echo(self, stream: Stream, data: bytes) -> None:
        """The job's bytes, as it wrote them (the `Echo` of `Job.start`)."""
        with self._lock:
            if data and self._write(stream, data):
                self._mid_line[stream] = not data.endswith(b"\n")

    def own(self, stream: Stream) -> TextIO:
        """A text stream for hangwatch's own output on `stream`, passed on a whole line at a
        time."""
        return cast(TextIO, _OwnLines(self, stream))

    def line(self, stream: Stream, text: str) -> None:
        """Whole lines of hangwatch's own, after a newline if the job left its line open."""
        with self._lock:
            head = "\n" if self._mid_line[stream] else ""
            if self._write(stream, (head + text).encode("utf-8", "replace")):
                self._mid_line[stream] = False

    def _write(self, stream: Stream, data: bytes) -> bool:
        if stream in self._gone:
            return False
        target = self._targets[stream]
        try:
            raw: BinaryIO | None = getattr(target, "buffer", None)
            if raw is None:
                target.write(data.decode("utf-8", "replace"))
                target.flush()
            else:
                target.flush()  # text written to it directly goes first
                raw.write(data)
                raw.flush()
            return True
        except (OSError, ValueError):  # the reader went away, or the stream was closed
            self._gone.add(stream)
            discard_output(target)
            return False


class _OwnLines(io.TextIOBase):
    def __init__(self, terminal: Terminal, stream: Stream) -> None:
        super().__init__()
        self._terminal = terminal
        self._stream = stream
        self._partial = ""  # `print` writes its text and its newline apart

    def write(self, text: str) -> int:
        whole, newline, self._partial = (self._partial + text).rpartition("\n")
        if newline:
            self._terminal.line(self._stream, whole + newline)
        return len(text)

    def writable(self) -> bool:
        return True


def adopt_orphans() -> Callable[[], None]:
    """Make this process the child subreaper (Linux): a job's process whose parent exits comes
    to us instead of to init, so a double-forked daemon is still found as our child. Returns
    the undo; does nothing where the kernel does not offer it."""
    if not sys.platform.startswith("linux"):
        return lambda: None
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        return lambda: None
    return lambda: libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


class Job:
    """A started command. `start()` it; read `returncode` once `wait()` says it is done."""

    def __init__(self, proc: subprocess.Popen[bytes], log: BinaryIO, echo: Echo,
                 on_lines: Callable[[bytes], None], on_done: Callable[[], None], *,
                 leftover_grace: float, poll_s: float,
                 on_partial: Callable[[bytes], None] = lambda _: None,
                 clock: Clock | None = None) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.returncode: int | None = None  # Popen's: negative for a signal
        self.stopped: Stopped | None = None  # how the job was last ended by us, if it was
        self._pipes = JobPipes({"stdout": proc.stdout, "stderr": proc.stderr}, log, echo=echo,
                               on_lines=on_lines, on_partial=on_partial,
                               clock=SystemClock() if clock is None else clock)
        self._on_done = on_done
        self._poll_s = poll_s
        self._procfs = ProcFS()
        self._tree: dict[int, psutil.Process] = {proc.pid: psutil.Process(proc.pid)}
        self._tree_lock = threading.Lock()
        self._stop_lock = threading.Lock()
        self._exited = threading.Event()  # the command itself has exited
        self._drained = threading.Event()  # its pipes are closed and every line handed on
        self._abandon = threading.Event()  # stop reading: a writer we cannot end holds a pipe
        self._done = threading.Event()
        self._leftover_grace = leftover_grace
        self._threads = [
            threading.Thread(target=self._pump, name="hangwatch-run-output", daemon=True),
            threading.Thread(target=self._track, name="hangwatch-run-tree", daemon=True),
            threading.Thread(target=self._supervise, name="hangwatch-run-wait", daemon=True),
        ]

    @classmethod
    def start(cls, argv: Sequence[str], *, log_path: Path, echo: Echo,
              on_lines: Callable[[bytes], None], on_done: Callable[[], None] = lambda: None,
              env: Mapping[str, str] | None = None, leftover_grace: float = 10.0,
              poll_s: float = POLL_TREE_S,
              on_partial: Callable[[bytes], None] = lambda _: None,
              clock: Clock | None = None) -> Job:
        """Start `argv` (no shell) in a new session. `on_lines` gets complete lines, \\n-ended,
        in the order they are written to the log; `on_done` is called once after the last;
        `on_partial` gets a stream's unfinished last line once it has been quiet a moment.
        Processes the job leaves behind when it exits get SIGTERM, then SIGKILL after
        `leftover_grace` seconds."""
        if not argv:
            raise JobStartError("no command given: hangwatch run [options] -- CMD [ARGS...]", 2)
        child_env = dict(os.environ if env is None else env)
        # A Python child writing to a pipe buffers its output in 8 KiB blocks: its progress
        # would reach us late, or only at exit, and look like a stall.
        child_env.setdefault("PYTHONUNBUFFERED", "1")
        try:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log = log_path.open("wb")
        except OSError as exc:
            raise JobStartError(f"cannot write the log {log_path}: {exc.strerror or exc}",
                                2) from None
        try:
            proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env=child_env, start_new_session=True)
        except FileNotFoundError:
            log.close()
            raise JobStartError(f"command not found: {argv[0]}", NOT_FOUND) from None
        except OSError as exc:
            log.close()
            raise JobStartError(f"cannot execute {argv[0]}: {exc.strerror or exc}",
                                NOT_EXECUTABLE) from None
        job = cls(proc, log, echo, on_lines, on_done, leftover_grace=leftover_grace,
                  poll_s=poll_s, on_partial=on_partial, clock=clock)
        for thread in job._threads:
            thread.start()
        return job

    # --- state ---------------------------------------------------------------------------

    @property
    def log_error(self) -> str | None:
        """Why the log stopped being written, if it did (the job and the watch went on)."""
        return self._pipes.log_error

    def known_pids(self) -> list[int]:
        """Every process of the job alive now, the command first; refreshed on the spot."""
        self.refresh()
        return [p.pid for p in self._alive()]

    def exited(self) -> bool:
        return self._exited.is_set()

    def done(self) -> bool:
        """Exited, nothing of it left running, all its output handed on."""
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit status as a shell reports it once done; None while still running."""
        if not self._done.wait(timeout) or self.returncode is None:
            return None
        return exit_status(self.returncode)

    # --- control -------------------------------------------------------------------------

    def send(self, sig: int) -> None:
        """Signal the job's process group and every known process that left it."""
        self.refresh()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)
        for proc in self._alive():
            # Once is enough: a second SIGINT would hit the job's own handler mid-cleanup.
            with contextlib.suppress(psutil.Error, OSError):
                if os.getpgid(proc.pid) != self.pid:
                    proc.send_signal(sig)  # psutil checks the pid still names the same process

    def stop(self, grace: float) -> Stopped:
        """SIGTERM to all of the job, up to `grace` seconds to exit, then SIGKILL to the rest.
        Returns once none of its processes is left (or stuck in the kernel past KILL_WAIT_S)."""
        with self._stop_lock:
            self.refresh()
            terminated = len(self._alive())
            if not terminated:
                return Stopped(0, 0)
            self.send(signal.SIGTERM)
            left = self._wait_gone(grace)
            if left:
                self.send(signal.SIGKILL)
                self._wait_gone(KILL_WAIT_S)
            self.stopped = Stopped(terminated, left)
            return self.stopped

    # --- tree ----------------------------------------------------------------------------

    def refresh(self) -> None:
        """Remember every process of the job alive now: the descendants of every process known,
        whatever is still in the job's session or process group (an orphan reparented to
        init), and the job's orphans adopted by us as subreaper (our children outside our own
        session: our helpers, py-spy and the like, share it)."""
        table = self._procfs.table()
        me, our_session = os.getpid(), os.getsid(0)
        with self._tree_lock:
            roots = set(self._tree)
        roots.update(e.pid for e in table.values()
                     if self.pid in (e.session, e.pgrp)
                     or (e.ppid == me and e.session != our_session))
        found = roots | {f.pid for f in descendants(sorted(roots), table)}
        with self._tree_lock:
            for pid in found & table.keys():
                known = self._tree.get(pid)
                if known is None or (pid != self.pid and not _running(known)):
                    with contextlib.suppress(psutil.Error):
                        self._tree[pid] = psutil.Process(pid)
            # The dead need no signal and have no children left (those were reparented when
            # they exited): forget them, so a job that starts many short helpers costs nothing.
            for pid, proc in list(self._tree.items()):
                if pid != self.pid and not _running(proc):
                    del self._tree[pid]

    def _alive(self) -> list[psutil.Process]:
        """Known processes still running; the command counts until it has been reaped."""
        with self._tree_lock:
            members = list(self._tree.values())
        alive = []
        for proc in members:
            if proc.pid == self.pid:
                if not self._exited.is_set():
                    alive.append(proc)
                continue
            if _running(proc):
                alive.append(proc)
        return alive

    def _wait_gone(self, timeout: float) -> int:
        """Wait up to `timeout` for the job's processes to exit; how many remain."""
        deadline = time.monotonic() + timeout
        while alive := self._alive():
            if time.monotonic() >= deadline:
                return len(alive)
            time.sleep(0.05)
        return 0

    # --- threads -------------------------------------------------------------------------

    def _track(self) -> None:
        while not self._exited.wait(self._poll_s):
            self.refresh()

    def _supervise(self) -> None:
        self.refresh()
        returncode = self.proc.wait()
        self.returncode = returncode
        self._exited.set()
        # Whatever the command left running (a background child, a daemon) is part of the job
        # and would outlive it, holding our pipes open: end it the same way as on a stall.
        self.stop(self._leftover_grace)
        if not self._drained.wait(DRAIN_WAIT_S):
            self._abandon.set()
            self._drained.wait()
        self._done.set()
        self._on_done()

    def _pump(self) -> None:
        try:
            self._pipes.read_until_closed(self._abandon)
        finally:
            self._drained.set()


def _running(proc: psutil.Process) -> bool:
    """Alive and not a zombie. An adopted orphan that died is our zombie: reap it here."""
    try:
        if not proc.is_running():
            return False
        if proc.status() != psutil.STATUS_ZOMBIE:
            return True
        if proc.ppid() == os.getpid():
            os.waitpid(proc.pid, os.WNOHANG)
    except (psutil.Error, ChildProcessError):
        pass
    return False
