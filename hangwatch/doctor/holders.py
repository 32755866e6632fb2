"""Which process holds a TCP port, a file or a shared-memory segment, read from /proc.

Only processes whose /proc entries we may read are seen (our own user's, or all as root), so
every answer says how many processes could not be looked at.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hangwatch.escape.redact import redact_argv

_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's `st` column
MAX_COMMAND = 80


@dataclass
class Holders:
    pids: dict[str, list[int]] = field(default_factory=dict)  # target -> pids holding it
    unreadable: int = 0  # processes whose fds or maps we may not read


def listening_inodes(proc: Path, port: int) -> set[str]:
    """Socket inodes listening on `port`, any address, IPv4 or IPv6."""
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in (proc / "net" / table).read_text().splitlines()[1:]:
                cols = line.split()
                if len(cols) > 9 and cols[3] == _LISTEN and int(cols[1].rsplit(":", 1)[1],
                                                                16) == port:
                    inodes.add(f"socket:[{cols[9]}]")
    return inodes


def find_holders(proc: Path, targets: set[str], *, maps: bool = False) -> Holders:
    """Processes with an open fd (and, with `maps`, a mapping) on any of `targets`: file paths
    or `socket:[INODE]` names."""
    found = Holders()
    if not targets:
        return found
    for pid, entry in _processes(proc):
        try:
            held = {os.readlink(fd) for fd in (entry / "fd").iterdir()} & targets
            if maps:
                held |= _mapped(entry / "maps", targets)
        except OSError:
            found.unreadable += 1
            continue
        for target in held:
            found.pids.setdefault(target, []).append(pid)
    return found


def _processes(proc: Path) -> Iterator[tuple[int, Path]]:
    try:
        entries = list(proc.iterdir())
    except OSError:
        return
    me = os.getpid()
    for entry in entries:
        if entry.name.isdigit() and int(entry.name) != me:
            yield int(entry.name), entry


def _mapped(maps: Path, targets: set[str]) -> set[str]:
    held = set()
    with contextlib.suppress(FileNotFoundError):
        for line in maps.read_text().splitlines():
            parts = line.split(maxsplit=5)
            path = parts[5].strip().removesuffix(" (deleted)") if len(parts) == 6 else ""
            if path in targets:
                held.add(path)
    return held


def describe_pid(proc: Path, pid: int) -> str:
    """`pid 4242 (python train.py --lr 3e-4)`, secrets redacted, for a finding."""
    try:
        argv = (proc / str(pid) / "cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        command = " ".join(redact_argv([a.decode(errors="replace") for a in argv if a]))
    except OSError:
        command = ""
    if not command:
        with contextlib.suppress(OSError):
            command = (proc / str(pid) / "comm").read_text().strip()
    command = command if len(command) <= MAX_COMMAND else command[:MAX_COMMAND - 3] + "..."
    return f"pid {pid} ({command or 'exited'})"


def unreadable_note(holders: Holders) -> str:
    if not holders.unreadable:
        return ""
    return (f" ({holders.unreadable} processes of other users could not be looked at; "
            "run as root to see them)")
