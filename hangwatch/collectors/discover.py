"""Which processes make up the job, and how each was found.

Without `--pid`, the job is found from its log: the processes that hold it open for writing.
When that writer only relays someone else's output (`python train.py | tee log`), the
processes feeding its stdin pipe are the job. Then the descendants of everything found
(Ray workers, torchrun ranks, DataLoader workers). `--match` adds processes by command line.

The process table comes from /proc (a parameter, so tests use a fake tree); psutil's
`open_files()` finds log writers first and a scan of /proc/*/fd backs it up.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from hangwatch.collectors.procs import is_python

# Priority when one process is found several ways: the first way named here wins.
FOUND_BY = ("pid", "run-child", "log-writer", "group-of-writer", "match", "descendant",
            "ray-worker")
MAX_PROCESSES = 256
_RAY_PROCESS = re.compile(r"ray::|\S*raylet\b|\S*gcs_server\b")
_HELPER = re.compile(r"hangwatch\.collectors\.nvml_probe|(?:^|/)py-spy ")


@dataclass(frozen=True)
class Found:
    pid: int
    found_by: str
    via: str


@dataclass(frozen=True)
class ProcEntry:
    pid: int
    ppid: int
    pgrp: int
    session: int
    comm: str


class ProcFS:
    """The little of /proc that discovery needs, rooted anywhere."""

    def __init__(self, root: Path = Path("/proc")) -> None:
        self.root = root

    def table(self) -> dict[int, ProcEntry]:
        table: dict[int, ProcEntry] = {}
        try:
            names = os.listdir(self.root)
        except OSError:
            return table
        for name in names:
            if name.isdigit() and (entry := self.entry(int(name))) is not None:
                table[entry.pid] = entry
        return table

    def entry(self, pid: int) -> ProcEntry | None:
        try:
            raw = (self.root / str(pid) / "stat").read_text(errors="replace")
        except OSError:
            return None
        # `pid (comm) state ppid pgrp session ...`; comm may hold spaces and parentheses.
        head, _, rest = raw.rpartition(")")
        fields = rest.split()
        if len(fields) < 4:
            return None
        return ProcEntry(pid, int(fields[1]), int(fields[2]), int(fields[3]),
                         head.partition("(")[2])

    def fd_links(self, pid: int) -> dict[int, str]:
        fd_dir = self.root / str(pid) / "fd"
        links: dict[int, str] = {}
        try:
            names = os.listdir(fd_dir)
        except OSError:
            return links
        for name in names:
            try:
                links[int(name)] = os.readlink(fd_dir / name)
            except (OSError, ValueError):
                continue
        return links

    def fds_writing(self, pid: int, dev_ino: tuple[int, int]) -> list[int]:
        """The fds of `pid` open for writing on the file identified by (st_dev, st_ino)."""
        fds = []
        for fd in self.fd_links(pid):
            try:
                st = os.stat(self.root / str(pid) / "fd" / str(fd))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == dev_ino and self._writable(pid, fd):
                fds.append(fd)
        return fds

    def _writable(self, pid: int, fd: int) -> bool:
        try:
            info = (self.root / str(pid) / "fdinfo" / str(fd)).read_text()
        except OSError:
            return True  # the link alone says it is open; assume the worst about its mode
        for line in info.splitlines():
            if line.startswith("flags:"):
                return int(line.split()[1], 8) & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR)
        return True

    def cmdline(self, pid: int) -> str | None:
        try:
            raw = (self.root / str(pid) / "cmdline").read_bytes()
        except OSError:
            return None
        return raw.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")

    def argv(self, pid: int) -> tuple[str, ...]:
        """The command line as its arguments; raises OSError when it cannot be read."""
        raw = (self.root / str(pid) / "cmdline").read_bytes()
        return tuple(raw.rstrip(b"\0").decode(errors="replace").split("\0")) if raw else ()

    def environ(self, pid: int) -> dict[str, str]:
        """The environment the process started with; raises OSError when it cannot be read
        (another user's process: permission denied)."""
        raw = (self.root / str(pid) / "environ").read_bytes()
        pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
        return {k.decode(errors="replace"): v.decode(errors="replace") for k, _, v in pairs}

    def read(self, pid: int, name: str, tid: int | None = None) -> str:
        """A small file of the process (`wchan`), or of one of its threads; raises OSError."""
        folder = self.root / str(pid) if tid is None else self.root / str(pid) / "task" / str(tid)
        return (folder / name).read_text(errors="replace")

    def threads(self, pid: int) -> list[int]:
        try:
            return sorted(int(t) for t in os.listdir(self.root / str(pid) / "task")
                          if t.isdigit())
        except OSError:
            return []


def discover(*, pids: Sequence[int] = (), known_tree: Sequence[int] = (),
             log_paths: Sequence[Path] = (), match: str | None = None,
             procfs: ProcFS | None = None, ps: Any = psutil,
             self_pid: int | None = None, limit: int = MAX_PROCESSES
             ) -> tuple[list[Found], list[str]]:
    """(processes of the job in priority order, notes on how discovery went).

    `ps=None` skips psutil and uses the /proc scan alone.
    """
    procfs = procfs or ProcFS()
    table = procfs.table()
    found: dict[int, Found] = {}
    notes: list[str] = []
    ours = _our_family(table, os.getpid() if self_pid is None else self_pid, procfs)

    def add(items: Iterable[Found]) -> None:
        for item in items:
            old = found.get(item.pid)
            if old is None or FOUND_BY.index(item.found_by) < FOUND_BY.index(old.found_by):
                found[item.pid] = item

    add(Found(pid, "pid", "--pid") for pid in pids)
    add(Found(pid, "run-child", "started by hangwatch run") for pid in known_tree)
    for log in log_paths:
        writers = _log_writers(log, procfs, ps, table, notes)
        add(w for w in writers if w.pid not in ours)
        for writer in writers:
            add(f for f in _feeders(writer, procfs, table) if f.pid not in ours)
    if match:
        pattern = re.compile(match)
        for pid in sorted(table):
            cmdline = procfs.cmdline(pid) if pid not in ours else None
            if cmdline and pattern.search(cmdline):
                add([Found(pid, "match", f"command line matches {match!r}")])
    add(f for f in descendants(list(found), table) if f.pid not in ours)
    add(f for f in ray_workers(list(found), table, procfs) if f.pid not in ours)
    if not table:
        notes.append(f"cannot read the process table under {procfs.root}")
    if not found:
        notes.append("no process of the job found: name it with --pid PID or --match REGEX")
    ordered = sorted(found.values(), key=lambda f: (FOUND_BY.index(f.found_by), f.pid))
    if len(ordered) > limit:
        notes.append(f"{len(ordered)} processes found; only the first {limit} are examined")
    return ordered[:limit], notes


def _our_family(table: dict[int, ProcEntry], self_pid: int, procfs: ProcFS) -> set[int]:
    """Our own process, its ancestors (the shell that started us) and our helpers (the NVML
    probe, py-spy): never part of the job even when they match. Other children of ours are
    left in: `hangwatch demo` and `hangwatch run` watch jobs they started."""
    family = {self_pid}
    pid = self_pid
    while pid in table and table[pid].ppid not in family and table[pid].ppid > 0:
        pid = table[pid].ppid
        family.add(pid)
    family.update(child for child, entry in table.items() if entry.ppid == self_pid
                  and _HELPER.search(procfs.cmdline(child) or ""))
    return family


def _log_writers(log: Path, procfs: ProcFS, ps: Any, table: dict[int, ProcEntry],
                 notes: list[str]) -> list[Found]:
    try:
        st = os.stat(log)
    except OSError as exc:
        notes.append(f"{log}: {exc.strerror or exc}; no log writer to find")
        return []
    real = os.path.realpath(log)
    writers: list[Found] = []
    if ps is not None:
        for proc in ps.process_iter():
            try:
                fds = [f.fd for f in proc.open_files()
                       if f.path == real and f.flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR)]
            except (ps.AccessDenied, ps.NoSuchProcess):
                continue
            if fds:
                writers.append(Found(proc.pid, "log-writer", _fd_text(log, fds)))
    if not writers:
        # psutil can miss a file (renamed, opened through another path): match by inode.
        for pid in sorted(table):
            fds = procfs.fds_writing(pid, (st.st_dev, st.st_ino))
            if fds:
                writers.append(Found(pid, "log-writer", _fd_text(log, fds)))
    if not writers:
        notes.append(f"no process has {log} open for writing (it may write through a pipe "
                     "on another machine, or reopen the file per line)")
    return writers


def _fd_text(log: Path, fds: list[int]) -> str:
    return f"has {log} open for writing (fd {', '.join(map(str, fds))})"


def _feeders(writer: Found, procfs: ProcFS, table: dict[int, ProcEntry]) -> list[Found]:
    """A writer like `tee` relays its stdin: the job is whoever writes into that pipe, looked
    for in the writer's session; if the pipe cannot be traced, the writer's process group."""
    me = table.get(writer.pid)
    if me is None or is_python({"name": me.comm}):
        return []
    stdin = procfs.fd_links(writer.pid).get(0, "")
    if not stdin.startswith("pipe:"):
        return []
    via = f"writes into the pipe read by {me.comm} (pid {writer.pid})"
    feeders = []
    for pid, entry in sorted(table.items()):
        if pid != writer.pid and entry.session == me.session:
            links = procfs.fd_links(pid)
            if stdin in (links.get(1), links.get(2)):
                feeders.append(Found(pid, "group-of-writer", via))
    if feeders:
        return feeders
    via = f"in the process group of {me.comm} (pid {writer.pid})"
    return [Found(pid, "group-of-writer", via) for pid, entry in sorted(table.items())
            if pid != writer.pid and entry.pgrp == me.pgrp]


def ray_workers(found: Sequence[int], table: dict[int, ProcEntry],
                procfs: ProcFS) -> list[Found]:
    """Ray runs actors and tasks in workers the raylet starts, outside the driver's process
    tree: once a process of the job is a Ray worker or the raylet, every Ray worker
    (`ray::Class.method` titles) of the same user is part of the job."""
    titles = {pid: procfs.cmdline(pid) or "" for pid in table}
    if not any(_RAY_PROCESS.match(titles.get(pid, "")) for pid in found):
        return []
    uid = _uid(procfs, found[0])
    return [Found(pid, "ray-worker", "a Ray worker of the job's cluster")
            for pid in sorted(table) if titles[pid].startswith("ray::")
            and pid not in found and _uid(procfs, pid) == uid]


def _uid(procfs: ProcFS, pid: int) -> int | None:
    try:
        return os.stat(procfs.root / str(pid)).st_uid
    except OSError:
        return None


def descendants(roots: Sequence[int], table: dict[int, ProcEntry]) -> list[Found]:
    children: dict[int, list[int]] = {}
    for entry in table.values():
        children.setdefault(entry.ppid, []).append(entry.pid)
    out: list[Found] = []
    seen = set(roots)
    stack = list(roots)
    while stack:
        parent = stack.pop()
        for child in sorted(children.get(parent, ())):
            if child not in seen:
                seen.add(child)
                out.append(Found(child, "descendant", f"child of {parent}"))
                stack.append(child)
    return out
