"""A psutil-shaped provider with processes that deny access, vanish or hang on a read."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import psutil


class FakeProcess:
    def __init__(self, pid: int, *, status: str = "sleeping", name: str = "python3",
                 exe: str = "/usr/bin/python3", cmdline: tuple[str, ...] = ("python3", "x.py"),
                 environ: dict[str, str] | None = None, deny: tuple[str, ...] = (),
                 block: threading.Event | None = None) -> None:
        self.pid = pid
        self._status = status
        self._name = name
        self._exe = exe
        self._cmdline = list(cmdline)
        self._environ = environ or {}
        self._deny = deny
        self._block = block  # environ() waits on it: a process whose memory lock is held

    def _check(self, what: str) -> None:
        if what in self._deny:
            raise psutil.AccessDenied(self.pid)

    @contextlib.contextmanager
    def oneshot(self) -> Iterator[None]:
        yield

    def status(self) -> str:
        return self._status

    def ppid(self) -> int:
        return 1

    def name(self) -> str:
        return self._name

    def create_time(self) -> float:
        return 1_767_225_600.0

    def exe(self) -> str:
        self._check("exe")
        return self._exe

    def num_threads(self) -> int:
        return 3

    def cpu_times(self) -> Any:
        return SimpleNamespace(user=1.0, system=0.5)

    def cmdline(self) -> list[str]:
        self._check("cmdline")
        return self._cmdline

    def memory_info(self) -> Any:
        return SimpleNamespace(rss=100 * 2**20)

    def num_fds(self) -> int:
        return 12

    def rlimit(self, which: int) -> tuple[int, int]:
        return (1024, 4096)

    def net_connections(self, kind: str) -> list[Any]:
        self._check("net_connections")
        return []

    def environ(self) -> dict[str, str]:
        self._check("environ")
        if self._block is not None:
            self._block.wait()
        return self._environ


class FakePsutil:
    NoSuchProcess = psutil.NoSuchProcess
    ZombieProcess = psutil.ZombieProcess
    AccessDenied = psutil.AccessDenied
    RLIMIT_NOFILE = psutil.RLIMIT_NOFILE

    def __init__(self, *processes: FakeProcess) -> None:
        self._processes = {p.pid: p for p in processes}

    def Process(self, pid: int) -> FakeProcess:
        if pid not in self._processes:
            raise psutil.NoSuchProcess(pid)
        return self._processes[pid]

    def process_iter(self) -> list[FakeProcess]:
        return list(self._processes.values())
