"""What a check returns, and the machine the checks look at (every OS access, injectable)."""

from __future__ import annotations

import os
import resource
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import psutil

from hangwatch.collectors.bounded import CommandResult, run_command
from hangwatch.doctor.timex import read_adjtimex

Status = Literal["ok", "warn", "fail", "skip"]
STATUSES: tuple[Status, ...] = ("ok", "warn", "fail", "skip")


@dataclass(frozen=True)
class Check:
    id: str
    status: Status
    detail: str
    fix: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"id": self.id, "status": self.status, "detail": self.detail, "fix": self.fix}


Facts = dict[str, Any]
Outcome = tuple[list[Check], Facts]


def _resolve(host: str) -> list[str]:
    return sorted({str(info[4][0]) for info in socket.getaddrinfo(host, None,
                                                                    type=socket.SOCK_STREAM)})


def _interfaces() -> dict[str, list[str]]:
    return {name: [a.address.split("%")[0] for a in addrs
                   if a.family in (socket.AF_INET, socket.AF_INET6)]
            for name, addrs in psutil.net_if_addrs().items()}


@dataclass(frozen=True)
class Machine:
    """Where the checks read the machine. Defaults are the real one; tests pass fake roots."""

    env: Mapping[str, str]
    proc: Path = Path("/proc")
    sysfs: Path = Path("/sys")
    shm: Path = Path("/dev/shm")
    tmp: Path = Path(tempfile.gettempdir())
    home: Path = field(default_factory=Path.home)
    hostname: str = field(default_factory=socket.gethostname)
    python: str = sys.executable
    sockets: Callable[[int, int], socket.socket] = socket.socket
    resolve: Callable[[str], list[str]] = _resolve
    interfaces: Callable[[], dict[str, list[str]]] = _interfaces
    statvfs: Callable[[str], os.statvfs_result] = os.statvfs
    getrlimit: Callable[[int], tuple[int, int]] = resource.getrlimit
    run: Callable[[Sequence[str], float], CommandResult] = run_command
    which: Callable[[str], str | None] = shutil.which
    timex: Callable[[], dict[str, Any] | None] = read_adjtimex

    @property
    def mounts(self) -> Path:
        return self.proc / "self" / "mounts"


@dataclass(frozen=True)
class Options:
    data: tuple[Path, ...] = ()
    disk: tuple[Path, ...] = (Path("."),)
    timeout: float = 15.0
    pack_checks: tuple[Any, ...] = ()  # core.model.PackCheck


@dataclass(frozen=True)
class Context:
    """What a family of checks gets: the machine, the options, and the time it may use."""

    machine: Machine
    options: Options
    deadline: float

    @property
    def env(self) -> Mapping[str, str]:
        return self.machine.env

    def bound(self, wanted: float) -> float:
        """A timeout for one blocking call: `wanted`, cut so that its own finding (not the
        runner's backstop) comes back before the deadline."""
        return max(0.1, min(wanted, self.deadline - time.monotonic() - 0.5))
