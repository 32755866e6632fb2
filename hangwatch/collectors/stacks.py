"""Python stacks through py-spy: where each process of the job is waiting.

Dumps run in parallel, each under its own timeout and all under one deadline. When py-spy is
missing or may not attach, the reason and the way to enable it are recorded instead.
"""

from __future__ import annotations

import os
import queue
import shutil
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hangwatch.collectors.bounded import CommandResult, run_command
from hangwatch.escape.redact import redact_text

MISSING_HINT = "py-spy not found next to {python} or on PATH: pip install py-spy"
PTRACE_HINT = ("py-spy may not attach (ptrace): run hangwatch as root or as the job's user "
               "with CAP_SYS_PTRACE (docker: --cap-add SYS_PTRACE; Kubernetes: "
               "securityContext.capabilities.add: [SYS_PTRACE]; systemd: "
               "AmbientCapabilities=CAP_SYS_PTRACE), or allow attaching with "
               "`sudo sysctl kernel.yama.ptrace_scope=0`")
_PERMISSION = ("permission denied", "operation not permitted", "os error 1)", "os error 13)")
_NOT_PYTHON = ("failed to find python version", "no python", "not a python")
_GONE = ("no such process", "os error 3)", "check that the process is running")

Runner = Callable[[Sequence[str], float, Mapping[str, str] | None], CommandResult]


def find_py_spy() -> str | None:
    """py-spy installed beside this Python (a venv's bin/) first, then anywhere on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("py-spy")


def ptrace_scope(root: Path = Path("/proc")) -> str | None:
    try:
        return (root / "sys/kernel/yama/ptrace_scope").read_text().strip()
    except OSError:
        return None


def dump_stacks(pids: Sequence[int], sink: dict[int, dict[str, Any]], *, py_spy: str | None,
                timeout: float, deadline: float, native: bool = False, workers: int = 8,
                runner: Runner = run_command) -> None:
    """Fill `sink[pid]` with {"stack": text} or {"error": why}; returns by `deadline` (+1 s)."""
    if py_spy is None:
        for pid in pids:
            sink[pid] = {"error": MISSING_HINT.format(python=sys.executable)}
        return
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for pid in pids:
        todo.put(pid)

    def work() -> None:
        while True:
            try:
                pid = todo.get_nowait()
            except queue.Empty:
                return
            left = deadline - time.monotonic()
            if left <= 0.05:
                sink[pid] = {"error": "not dumped: the snapshot's time bound was reached"}
                continue
            sink[pid] = _dump(runner, py_spy, pid, min(timeout, left), native)

    threads = [threading.Thread(target=work, name="hangwatch-py-spy", daemon=True)
               for _ in range(min(workers, len(pids)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic() + 1.0))


def _dump(runner: Runner, py_spy: str, pid: int, timeout: float,
          native: bool) -> dict[str, Any]:
    argv = [py_spy, "dump", "--pid", str(pid), *(["--native"] if native else [])]
    result = runner(argv, timeout, None)
    if result.timed_out:
        return {"error": f"py-spy did not finish within {timeout:.1f}s"}
    if result.start_error is not None:
        return {"error": f"cannot run {py_spy}: {result.start_error}"}
    if result.returncode == 0 and result.stdout.strip():
        return {"stack": redact_text(_without_process_line(result.stdout))}
    return {"error": _explain(f"{result.stderr}\n{result.stdout}", result.returncode)}


def _without_process_line(text: str) -> str:
    """Drop py-spy's `Process N: <command line>` header (the command line may span lines):
    the command line is already in the process record, redacted argument by argument."""
    lines = text.rstrip().splitlines()
    if lines and lines[0].startswith("Process "):
        start = next((i for i, line in enumerate(lines) if line.startswith("Python v")), 1)
        lines = lines[start:]
    return "\n".join(lines)


def _explain(output: str, returncode: int | None) -> str:
    low = output.lower()
    if any(s in low for s in _PERMISSION):
        scope = ptrace_scope()
        return PTRACE_HINT + (f" (kernel.yama.ptrace_scope is {scope})" if scope else "")
    if any(s in low for s in _GONE):
        return "the process exited before its stack was taken"
    if any(s in low for s in _NOT_PYTHON):
        return "not a Python process (py-spy found no interpreter in it)"
    first = next((line.strip() for line in output.splitlines() if line.strip()), "no output")
    return f"py-spy failed (exit {returncode}): {redact_text(first)}"
