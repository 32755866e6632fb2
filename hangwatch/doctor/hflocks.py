"""Hugging Face datasets locks: which are held by a running build the job will wait on, and
which were left by a process that is gone (stale) and will make it wait for nothing.

datasets locks with filelock. Its native lock is flock(2) on an empty file: the kernel lets go
when the owner dies, so a lock file left behind is harmless. Where the file system has no
flock (some NFS and Lustre mounts), filelock falls back to an existence lock: a marker file
whose first lines name the owner (`<pid>\\n<host>\\n`, or `filelock/2` then `pid=`/`host=`
fields). Such a marker outlives a killed owner and holds every later build until removed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from hangwatch.doctor.holders import describe_pid, find_holders
from hangwatch.doctor.model import Check, Context

MAX_LOCKS = 2000  # lock files looked at; a cache holds a handful per dataset
MAX_DEPTH = 5
SHOWN = 3
MARKER_BYTES = 512  # an owner record is a few lines; a longer file is no marker
NOWHERE = "a process not visible here (another node sharing the cache, or another user)"


@dataclass(frozen=True)
class Owner:
    pid: int
    host: str


def check(ctx: Context) -> list[Check]:
    cache = cache_dir(ctx)
    if not cache.is_dir():
        return [Check("data.hf_locks", "skip", f"no Hugging Face datasets cache at {cache}")]
    locks = list(lock_files(cache))
    held: dict[Path, str] = {}  # lock -> who holds it
    stale: dict[Path, Owner] = {}
    flocked = [lock for lock in locks if is_flocked(lock)]
    holders = find_holders(ctx.machine.proc, {str(p) for p in flocked})
    for lock in flocked:
        pids = holders.pids.get(str(lock), [])
        held[lock] = ", ".join(describe_pid(ctx.machine.proc, p) for p in pids) or NOWHERE
    for lock in locks:
        if lock in held or (owner := marker_owner(lock)) is None:
            continue
        if owner.host != ctx.machine.hostname:
            # Another node's process cannot be looked at from here: held, until proven gone.
            held[lock] = f"pid {owner.pid} on host {owner.host} (not checked from here)"
        elif (ctx.machine.proc / str(owner.pid)).exists():
            held[lock] = describe_pid(ctx.machine.proc, owner.pid)
        else:
            stale[lock] = owner
    checks = [_held(cache, locks, held)]
    if stale:
        checks.append(_stale(stale))
    return checks


def _held(cache: Path, locks: list[Path], held: dict[Path, str]) -> Check:
    if not held:
        return Check("data.hf_locks", "ok", f"{len(locks)} lock file(s) in {cache}, none held")
    described = [f"{lock.name} held by {who}" for lock, who in list(held.items())[:SHOWN]]
    return Check("data.hf_locks", "warn",
                 f"{len(held)} datasets lock(s) held: {'; '.join(described)}; the job will "
                 "wait on them",
                 "let that build finish, or end it if it is left from an earlier run; on a "
                 "cache shared over NFS, give each node its own HF_DATASETS_CACHE")


def _stale(stale: dict[Path, Owner]) -> Check:
    shown = list(stale.items())[:SHOWN]
    described = [f"{lock} (left by pid {owner.pid}, which is gone)" for lock, owner in shown]
    more = f" and {len(stale) - SHOWN} more" if len(stale) > SHOWN else ""
    remove = "rm -- " + " ".join(shlex.quote(str(lock)) for lock in stale)
    return Check("data.hf_stale_locks", "warn",
                 f"{len(stale)} stale datasets lock(s): {'; '.join(described)}{more}; a "
                 "build that meets one waits for an owner that will never let go",
                 f"remove them once no build of that dataset runs: {remove}")


def cache_dir(ctx: Context) -> Path:
    env = ctx.env
    if env.get("HF_DATASETS_CACHE"):
        return Path(env["HF_DATASETS_CACHE"])
    hf_home = Path(env["HF_HOME"]) if env.get("HF_HOME") else (
        ctx.machine.home / ".cache" / "huggingface")
    return hf_home / "datasets"


def lock_files(root: Path) -> Iterator[Path]:
    seen = 0
    stack = [(root, 0)]
    while stack and seen < MAX_LOCKS:
        folder, depth = stack.pop()
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                seen += 1
                if entry.name.endswith(".lock") and entry.is_file(follow_symlinks=False):
                    yield Path(entry.path)
                elif depth < MAX_DEPTH and entry.is_dir(follow_symlinks=False):
                    stack.append((Path(entry.path), depth + 1))


def is_flocked(lock: Path) -> bool:
    """Try flock(2) without waiting, and let go at once."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    finally:
        os.close(fd)


def marker_owner(lock: Path) -> Owner | None:
    """The owner an existence-lock marker names, or None (an empty flock file, or no marker)."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        head = os.read(fd, MARKER_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if not head or len(head) > MARKER_BYTES:
        return None
    lines = head.decode(errors="replace").splitlines()
    if lines[0] == "filelock/2":
        fields = dict(line.partition("=")[::2] for line in lines[1:])
        pid, host = fields.get("pid", ""), fields.get("host", "")
    else:
        pid, host = lines[0], lines[1] if len(lines) > 1 else ""
    if not (pid.isascii() and pid.isdigit() and 0 < int(pid) < 2 ** 31 and host.strip()):
        return None
    return Owner(int(pid), host.strip())
