"""Each thread's kernel wait from /proc, for processes whose stacks cannot be taken.

`wchan` and the fd links need only the right to read the process; `syscall` needs the right
to ptrace it, so where ptrace is refused it is often missing too, and the wait channel alone
remains. /proc is a parameter, so tests read a fake tree.
"""

from __future__ import annotations

from hangwatch.collectors.discover import ProcFS
from hangwatch.core.kernelwait import ThreadWait


def thread_waits(pid: int, procfs: ProcFS, max_threads: int = 64) -> list[ThreadWait]:
    """The process's threads (the main thread first), each as the kernel shows it."""
    fds = procfs.fd_links(pid)
    tids = procfs.threads(pid) or [pid]
    tids = sorted(tids, key=lambda t: (t != pid, t))[:max_threads]
    return [ThreadWait(tid, _quiet(procfs, pid, "wchan", tid), _quiet(procfs, pid, "syscall", tid),
                       fds, _state(_quiet(procfs, pid, "stat", tid))) for tid in tids]


def _quiet(procfs: ProcFS, pid: int, name: str, tid: int) -> str | None:
    try:
        return procfs.read(pid, name, tid).strip() or None
    except OSError:
        return None


def _state(stat: str | None) -> str | None:
    if not stat:
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[0] if fields else None
