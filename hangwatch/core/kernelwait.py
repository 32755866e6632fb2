"""The kernel's view of a waiting thread, when its Python stack cannot be taken (ptrace refused,
not a Python process): the wait channel, the system call, and the file or socket it waits on.

Coarser than a stack (every thread waiting on a lock is in `futex`), but enough to tell a rank
reading a socket from one waiting on a pipe, a file on a dead mount, or the GPU driver.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hangwatch.core.stackgroups import Place

# System calls whose first argument is the file descriptor waited on; the rest by name only.
_FD_CALLS = {"read", "write", "pread64", "pwrite64", "readv", "writev", "recvfrom", "recvmsg",
             "sendto", "sendmsg", "accept", "accept4", "connect", "flock", "fsync", "fdatasync",
             "ioctl", "epoll_wait", "epoll_pwait", "epoll_pwait2"}
SYSCALL_NAMES: dict[str, dict[int, str]] = {
    "x86_64": {0: "read", 1: "write", 7: "poll", 17: "pread64", 18: "pwrite64", 19: "readv",
               20: "writev", 23: "select", 16: "ioctl", 35: "nanosleep", 42: "connect",
               43: "accept", 44: "sendto", 45: "recvfrom", 46: "sendmsg", 47: "recvmsg",
               61: "wait4", 73: "flock", 74: "fsync", 75: "fdatasync", 202: "futex",
               230: "clock_nanosleep", 232: "epoll_wait", 247: "waitid", 257: "openat",
               270: "pselect6", 271: "ppoll", 281: "epoll_pwait", 288: "accept4",
               441: "epoll_pwait2"},
    "aarch64": {29: "ioctl", 32: "flock", 22: "epoll_pwait", 56: "openat", 63: "read",
                64: "write", 65: "readv", 66: "writev", 67: "pread64", 68: "pwrite64",
                72: "pselect6", 73: "ppoll", 82: "fsync", 83: "fdatasync", 95: "waitid",
                98: "futex", 101: "nanosleep", 115: "clock_nanosleep", 202: "accept",
                203: "connect", 206: "sendto", 207: "recvfrom", 211: "sendmsg", 212: "recvmsg",
                242: "accept4", 260: "wait4", 441: "epoll_pwait2"},
}
_ANON = re.compile(r"^(?P<kind>socket|pipe|anon_inode):\[?(?P<what>[^\]]*)\]?$")


@dataclass(frozen=True)
class ThreadWait:
    """One thread as /proc/PID/task/TID shows it. `syscall` is the file's text: `202 0x... `,
    `running`, or None when it could not be read (it needs the same right as ptrace)."""

    tid: int
    wchan: str | None
    syscall: str | None
    fd_targets: dict[int, str]  # the process's fd -> link target (`socket:[123]`, a path)
    state: str | None = None  # the letter from stat: S, D, R, ...


def syscall_of(wait: ThreadWait, arch: str) -> tuple[str | None, int | None]:
    """(the system call's name, the fd it waits on where its first argument is one)."""
    if not wait.syscall or wait.syscall.strip() in ("running", "-1"):
        return (("running" if wait.syscall and wait.syscall.strip() == "running" else None),
                None)
    fields = wait.syscall.split()
    try:
        number = int(fields[0])
    except ValueError:
        return None, None
    name = SYSCALL_NAMES.get(arch, {}).get(number, f"syscall {number}")
    fd = None
    if name in _FD_CALLS and len(fields) > 1:
        try:
            fd = int(fields[1], 16)
        except ValueError:
            fd = None
    return name, fd


def describe_target(target: str) -> str:
    """A link target with what differs between processes dropped: `socket:[88]` -> `socket`,
    `anon_inode:[eventpoll]` -> `eventpoll`; paths stay (the same file is the same place)."""
    found = _ANON.match(target)
    if found is None:
        return target
    return found["what"] if found["kind"] == "anon_inode" else found["kind"]


def kernel_place(wait: ThreadWait, arch: str) -> Place:
    """The place of a thread seen from the kernel alone."""
    name, fd = syscall_of(wait, arch)
    parts = []
    if name is not None:
        on = ""
        if fd is not None:
            target = wait.fd_targets.get(fd)
            on = f" on {describe_target(target)}" if target else f" on fd {fd}"
        parts.append(f"{name}{on}")
    if wait.wchan and wait.wchan != "0":
        parts.append(f"kernel: {wait.wchan}")
    if wait.state == "D":
        parts.append("uninterruptible")
    where = ", ".join(parts) or "no kernel wait readable"
    text = f"[{where}]"
    return Place(text, text, (text,), (), None, _label(name, wait.state))


def _label(name: str | None, state: str | None) -> str | None:
    if state == "D":
        return "stuck in the kernel (D state)"
    if name in ("futex",):
        return "waiting on a lock or condition"
    if name in ("nanosleep", "clock_nanosleep"):
        return "sleeping"
    if name in ("wait4", "waitid"):
        return "waiting for a child process"
    if name is not None and name != "running":
        return "waiting for I/O"
    return None
