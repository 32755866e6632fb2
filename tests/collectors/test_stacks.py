"""py-spy against real blocked processes, and a fake runner for what py-spy may answer."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from hangwatch.collectors import stacks
from hangwatch.collectors.bounded import CommandResult, run_command
from hangwatch.collectors.stacks import PTRACE_HINT, dump_stacks, find_py_spy
from tests.fakes.jobs import stack_of


def dump(pids, **kwargs):
    sink = {}
    kwargs.setdefault("py_spy", find_py_spy())
    kwargs.setdefault("timeout", 10)
    kwargs.setdefault("deadline", time.monotonic() + 20)
    dump_stacks(pids, sink, **kwargs)
    return sink


def test_stack_of_a_blocked_child_names_the_function_it_waits_in(jobs, tmp_path):
    child = jobs.blocked_python(tmp_path / "train.log", args=["--api-key", "sk-supersecret"])
    text = stack_of(dump([child.pid])[child.pid])
    assert "wait_for_weights (child.py:" in text
    # py-spy's `Process N: <command line>` header would leak the argument: it is dropped.
    assert "supersecret" not in text
    assert text.startswith("Python v")


def test_several_processes_are_dumped_in_parallel(jobs, tmp_path):
    children = [jobs.blocked_python(tmp_path / f"rank{i}.log") for i in range(3)]
    results = dump([c.pid for c in children])
    assert all("wait_for_weights" in stack_of(results[c.pid]) for c in children)


def test_process_without_python_says_so(jobs):
    sleeper = jobs.start(["sleep", "60"])
    time.sleep(0.05)
    assert dump([sleeper.pid])[sleeper.pid] == {
        "error": "not a Python process (py-spy found no interpreter in it)"}


def test_process_that_is_gone_says_so():
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert dump([gone.pid])[gone.pid] == {
        "error": "the process exited before its stack was taken"}


def test_missing_py_spy_says_how_to_install_it():
    result = dump([123], py_spy=None)[123]
    assert "pip install py-spy" in result["error"]


@pytest.mark.parametrize(("stdout", "stderr"), [
    ("", "Error: Failed to suspend process\nReason: Operation not permitted (os error 1)\n"),
    # py-spy 0.4 as a user without ptrace rights: the hint is on stdout, a symptom on stderr.
    ("Permission Denied: Try running again with elevated permissions by going 'sudo ...'\n",
     "Error: Failed to find python version from target process\n"),
])
def test_ptrace_refusal_says_how_to_enable_it(stdout, stderr):
    def refused(argv, timeout, env):
        return CommandResult(1, stdout, stderr)
    result = dump([123], py_spy="py-spy", runner=refused)[123]
    assert result["error"].startswith(PTRACE_HINT)
    assert "CAP_SYS_PTRACE" in result["error"] and "ptrace_scope" in result["error"]


def test_real_ptrace_refusal_is_explained(jobs, tmp_path):
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root to run py-spy as another user")
    child = jobs.blocked_python(tmp_path / "train.log")
    py_spy = find_py_spy()

    def as_nobody(argv, timeout, env):
        return run_command(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            *argv], timeout, env)
    result = dump([child.pid], py_spy=py_spy, runner=as_nobody)[child.pid]
    assert result["error"].startswith(PTRACE_HINT)


def test_hung_py_spy_is_recorded_as_a_timeout():
    def hung(argv, timeout, env):
        return CommandResult(None, "", "", timed_out=True)
    assert dump([5], py_spy="py-spy", timeout=2.5, runner=hung)[5] == {
        "error": "py-spy did not finish within 2.5s"}


def test_dumps_stop_at_the_deadline_and_say_so():
    def slow(argv, timeout, env):
        time.sleep(min(timeout, 0.3))
        return CommandResult(None, "", "", timed_out=True)
    started = time.monotonic()
    results = dump(list(range(1, 21)), py_spy="py-spy", workers=2, runner=slow,
                   deadline=time.monotonic() + 0.5)
    assert time.monotonic() - started < 1.5
    skipped = [r for r in results.values() if "time bound was reached" in r["error"]]
    assert len(results) == 20 and len(skipped) >= 14


def test_native_flag_is_passed_on():
    seen = []

    def record(argv, timeout, env):
        seen.append(list(argv))
        return CommandResult(0, "Process 7: x\nPython v3.11\n\nThread 7 (idle)\n  f (a.py:1)\n",
                             "")
    result = dump([7], py_spy="/opt/py-spy", native=True, runner=record)[7]
    assert seen == [["/opt/py-spy", "dump", "--pid", "7", "--native"]]
    assert result == {"stack": "Python v3.11\n\nThread 7 (idle)\n  f (a.py:1)"}


def test_py_spy_next_to_the_interpreter_comes_first(tmp_path, monkeypatch):
    (tmp_path / "py-spy").write_text("#!/bin/sh\n")
    (tmp_path / "py-spy").chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    assert find_py_spy() == str(tmp_path / "py-spy")
    monkeypatch.setattr(stacks.shutil, "which", lambda name: "/usr/local/bin/py-spy")
    (tmp_path / "py-spy").unlink()
    assert find_py_spy() == "/usr/local/bin/py-spy"
