"""The job runner on its own: real child processes, real pipes, real signals."""

from __future__ import annotations

import io
import os
import signal
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from hangwatch.jobs.job import (
    NOT_EXECUTABLE,
    NOT_FOUND,
    Job,
    JobStartError,
    Stream,
    Terminal,
    adopt_orphans,
    exit_status,
)

PY = sys.executable


class Capture:
    """What the job showed on the terminal and handed on as lines."""

    def __init__(self) -> None:
        self.echoed: list[tuple[Stream, bytes]] = []
        self.lines: list[bytes] = []
        self.done = threading.Event()
        self._got = threading.Condition()

    def echo(self, stream: Stream, data: bytes) -> None:
        self.echoed.append((stream, data))

    def on_lines(self, data: bytes) -> None:
        with self._got:
            self.lines.append(data)
            self._got.notify_all()

    def text(self) -> str:
        return b"".join(self.lines).decode()

    def raw(self, stream: Stream) -> bytes:
        return b"".join(d for s, d in self.echoed if s == stream)

    def wait_for(self, needle: str, timeout: float = 10.0) -> bool:
        with self._got:
            return self._got.wait_for(lambda: needle in self.text(), timeout)


@pytest.fixture
def jobs(tmp_path: Path) -> Iterator[list[Job]]:
    """Every job started by a test is ended with it, even when the test fails."""
    started: list[Job] = []
    yield started
    for job in started:
        job.stop(0.5)
        assert job.wait(10) is not None


def start(jobs: list[Job], tmp_path: Path, script: str, *args: str, grace: float = 1.0,
          env: dict[str, str] | None = None) -> tuple[Job, Capture]:
    cap = Capture()
    path = tmp_path / f"job{len(jobs)}.py"
    path.write_text(textwrap.dedent(script))
    job = Job.start([PY, str(path), *args], log_path=tmp_path / "out.log", echo=cap.echo,
                    on_lines=cap.on_lines, on_done=cap.done.set, leftover_grace=grace,
                    poll_s=0.2, env=env)
    jobs.append(job)
    return job, cap


def pids_from(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_output_is_echoed_unchanged_and_logged_and_handed_on_in_order(jobs, tmp_path):
    job, cap = start(jobs, tmp_path, r"""
        import sys, time
        sys.stdout.write("out 1\n"); sys.stdout.flush(); time.sleep(0.1)
        sys.stderr.write("err 1\n"); sys.stderr.flush(); time.sleep(0.1)
        sys.stdout.write("progress 10%\rprogress 50%\r\nhalf a li"); sys.stdout.flush()
        time.sleep(0.1)
        sys.stdout.write("ne\nno newline at the end")
    """)
    assert job.wait(10) == 0
    assert cap.done.is_set()
    assert cap.raw("stdout") == b"out 1\nprogress 10%\rprogress 50%\r\nhalf a line\nno newline " \
                                b"at the end"
    assert cap.raw("stderr") == b"err 1\n"
    expected = "out 1\nerr 1\nprogress 10%\nprogress 50%\nhalf a line\nno newline at the end\n"
    assert cap.text() == expected
    assert (tmp_path / "out.log").read_text() == expected
    assert all(block.endswith(b"\n") for block in cap.lines)


def test_python_output_without_flush_arrives_while_the_job_runs(jobs, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    job, cap = start(jobs, tmp_path, """
        import time
        print("step 1 loss 0.5")  # no flush: a pipe would hold it in Python's buffer
        time.sleep(30)
    """, env=env)
    assert cap.wait_for("step 1 loss 0.5", timeout=5)
    assert not job.exited()


@pytest.mark.parametrize(("code", "status"), [
    ("raise SystemExit(7)", 7),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", 137),
    ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", 143),
    ("pass", 0),
])
def test_exit_status_is_the_commands_with_signals_as_128_plus_n(jobs, tmp_path, code, status):
    job, _ = start(jobs, tmp_path, code)
    assert job.wait(10) == status


def test_exit_status_maps_popen_returncodes_as_a_shell_does():
    assert exit_status(0) == 0
    assert exit_status(7) == 7
    assert exit_status(-signal.SIGKILL) == 137
    assert exit_status(-signal.SIGINT) == 130


def test_missing_command_is_127_and_not_executable_is_126(tmp_path):
    log = tmp_path / "out.log"
    with pytest.raises(JobStartError) as missing:
        Job.start(["/no/such/program"], log_path=log, echo=Capture().echo,
                  on_lines=Capture().on_lines)
    assert missing.value.exit_status == NOT_FOUND
    assert "command not found: /no/such/program" in str(missing.value)
    script = tmp_path / "not-executable.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    with pytest.raises(JobStartError) as denied:
        Job.start([str(script)], log_path=log, echo=Capture().echo, on_lines=Capture().on_lines)
    assert denied.value.exit_status == NOT_EXECUTABLE
    assert "cannot execute" in str(denied.value)


def test_no_command_and_unwritable_log_are_usage_errors(tmp_path):
    with pytest.raises(JobStartError) as empty:
        Job.start([], log_path=tmp_path / "out.log", echo=Capture().echo,
                  on_lines=Capture().on_lines)
    assert empty.value.exit_status == 2
    (tmp_path / "file").write_text("")
    with pytest.raises(JobStartError) as unwritable:
        Job.start(["true"], log_path=tmp_path / "file" / "out.log", echo=Capture().echo,
                  on_lines=Capture().on_lines)
    assert unwritable.value.exit_status == 2
    assert "cannot write the log" in str(unwritable.value)


TREE = """
    import os, signal, subprocess, sys, time
    pids = sys.argv[1]
    def record():
        with open(pids, "a") as fh:
            fh.write(f"{os.getpid()}\\n")
    role = sys.argv[2] if len(sys.argv) > 2 else "root"
    record()
    if role == "escapee":
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # SIG_IGN was inherited from its parent
        os.setsid()  # leaves the job's process group
        time.sleep(300)
    elif role == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        subprocess.Popen([sys.executable, __file__, pids, "escapee"])
        time.sleep(300)
    else:
        subprocess.Popen([sys.executable, __file__, pids, "stubborn"])
        print("started", flush=True)
        time.sleep(300)
"""


def test_stop_ends_a_grandchild_that_left_the_group_and_one_that_ignores_sigterm(jobs,
                                                                                  tmp_path):
    pids_file = tmp_path / "pids"
    job, _ = start(jobs, tmp_path, TREE, str(pids_file))
    deadline = time.monotonic() + 10
    while len(pids_from(pids_file)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    pids = pids_from(pids_file)
    assert len(pids) == 3
    escapee = pids[2]
    assert os.getsid(escapee) == escapee  # out of the group: killpg alone would miss it
    time.sleep(0.5)  # a tree poll has seen it
    assert set(job.known_pids()) == set(pids)
    started = time.monotonic()
    stopped = job.stop(grace=1.0)
    assert stopped.terminated == 3
    assert stopped.killed == 1  # the one ignoring SIGTERM
    assert 1.0 <= time.monotonic() - started < 5
    assert job.wait(10) == 128 + signal.SIGTERM
    assert not [pid for pid in pids if running(pid)]


def test_a_double_forked_daemon_is_adopted_and_ended(jobs, tmp_path):
    undo = adopt_orphans()
    try:
        pids_file = tmp_path / "pids"
        job, _ = start(jobs, tmp_path, """
            import os, sys, time
            if os.fork() == 0:
                if os.fork() == 0:
                    os.setsid()
                    with open(sys.argv[1], "a") as fh:
                        fh.write(f"{os.getpid()}\\n")
                    time.sleep(300)
                os._exit(0)  # the daemon's parent is gone before any poll sees it
            time.sleep(300)
        """, str(pids_file))
        deadline = time.monotonic() + 10
        while not pids_from(pids_file) and time.monotonic() < deadline:
            time.sleep(0.05)
        [daemon] = pids_from(pids_file)
        assert psutil.Process(daemon).ppid() == os.getpid()
        assert daemon in job.known_pids()
        job.stop(grace=1.0)
        assert not running(daemon)
    finally:
        undo()


def test_processes_left_behind_by_an_exited_command_are_ended(jobs, tmp_path):
    pids_file = tmp_path / "pids"
    started = time.monotonic()
    job, cap = start(jobs, tmp_path, """
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        open(sys.argv[1], "w").write(str(child.pid))
        print("leaving a child behind")
    """, str(pids_file), grace=1.0)
    assert job.wait(10) == 0
    assert time.monotonic() - started < 8
    [child] = pids_from(pids_file)
    assert not running(child)
    assert "leaving a child behind" in cap.text()


def test_send_forwards_a_signal_the_job_handles_itself(jobs, tmp_path):
    job, cap = start(jobs, tmp_path, """
        import signal, sys, time
        def bye(signum, frame):
            print("got SIGINT, saving a checkpoint")
            sys.exit(5)
        signal.signal(signal.SIGINT, bye)
        print("ready")
        time.sleep(300)
    """)
    assert cap.wait_for("ready")
    job.send(signal.SIGINT)
    assert job.wait(10) == 5
    assert "got SIGINT, saving a checkpoint" in cap.text()


def test_terminal_echo_writes_bytes_unchanged_or_text_without_a_bytes_layer():
    raw_out, raw_err = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(raw_out, encoding="utf-8")
    err = io.TextIOWrapper(raw_err, encoding="utf-8")
    out.write("before ")
    terminal = Terminal(out, err)
    terminal.echo("stdout", b"bar \xff\r\n")
    terminal.echo("stderr", b"oops\n")
    assert raw_out.getvalue() == b"before bar \xff\r\n"
    assert raw_err.getvalue() == b"oops\n"
    text_out = io.StringIO()
    Terminal(text_out, io.StringIO()).echo("stdout", "é\n".encode())
    assert text_out.getvalue() == "é\n"


def test_own_lines_start_on_a_line_of_their_own_after_the_jobs_open_line():
    raw_err = io.BytesIO()
    terminal = Terminal(io.StringIO(), io.TextIOWrapper(raw_err, encoding="utf-8"))
    own = terminal.own("stderr")
    terminal.echo("stderr", b"Training:  10%|#  | 1/10\r")  # a tqdm bar: no newline
    print('{"event": "stall"}', file=own)  # print writes the text and the newline apart
    terminal.echo("stderr", b"more\n")
    print("hangwatch: ended the job", file=own)
    assert raw_err.getvalue().decode().split("\n") == [
        "Training:  10%|#  | 1/10\r", '{"event": "stall"}', "more",
        "hangwatch: ended the job", ""]


def test_a_closed_terminal_does_not_stop_the_log(jobs, tmp_path):
    closed = io.StringIO()
    closed.close()
    cap = Capture()
    job = Job.start([PY, "-c", "print('still logged')"], log_path=tmp_path / "out.log",
                    echo=Terminal(closed, closed).echo, on_lines=cap.on_lines)
    jobs.append(job)
    assert job.wait(10) == 0
    assert (tmp_path / "out.log").read_text() == "still logged\n"


def test_a_full_disk_loses_the_log_but_not_the_output_or_the_watch(jobs, tmp_path):
    cap = Capture()
    job = Job.start([PY, "-c", "print('one'); print('two')"], log_path=Path("/dev/full"),
                    echo=cap.echo, on_lines=cap.on_lines)
    jobs.append(job)
    assert job.wait(10) == 0
    assert cap.text() == "one\ntwo\n"
    assert cap.raw("stdout") == b"one\ntwo\n"
    assert job.log_error is not None and "/dev/full" in job.log_error


def test_log_lines_keep_a_line_longer_than_the_watch_reads_whole():
    from hangwatch.core.lines import MAX_LINE
    from hangwatch.sources.pipes import LogLines

    log = LogLines()
    piece = b"x" * (MAX_LINE // 3)
    written = [log.push(b"a\r\nb\r"), log.push(b"\nc")]
    written += [log.push(piece) for _ in range(5)]  # past MAX_LINE: written as it comes
    written += [log.push(b"end\nd"), log.flush()]
    assert b"".join(written) == b"a\nb\nc" + piece * 5 + b"end\nd\n"
    assert max(len(w) for w in written) <= MAX_LINE + len(piece)
