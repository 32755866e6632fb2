"""/dev/shm: big enough for NCCL and DataLoader workers, and no NCCL segments left by a run
that died.

Docker gives a container 64 MB of /dev/shm unless told otherwise (`--shm-size`, `--ipc=host`);
NCCL's shared-memory transport then fails or hangs as soon as the ranks of a node talk.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

from hangwatch.collectors.system import filesystem
from hangwatch.doctor.holders import describe_pid, find_holders, unreadable_note
from hangwatch.doctor.model import Check, Context, Outcome

MIB = 2**20
FAIL_BELOW = 256 * MIB
WARN_BELOW = 1024 * MIB
FREE_FAIL_BELOW = 128 * MIB
STATVFS_S = 3.0
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
SHOWN = 5


def run(ctx: Context) -> Outcome:
    shm = ctx.machine.shm
    if not shm.is_dir():
        return [Check("shm.size", "fail", f"{shm} does not exist",
                      "mount a tmpfs there: NCCL and DataLoader workers share memory through "
                      "it")], {}
    size_check, facts = _size(ctx)
    return [size_check, _stale_segments(ctx)], {"shm": facts}


def mounted_size(mounts: Path, mount_point: Path) -> tuple[int | None, str]:
    """(size in bytes from `size=`, None for tmpfs's default), and where it was read."""
    try:
        lines = mounts.read_text().splitlines()
    except OSError as exc:
        return None, f"cannot read {mounts}: {exc.strerror}"
    entry = None
    for line in lines:
        fields = line.split()
        # The last mount on a path is the one in effect; spaces in paths are written \040.
        if len(fields) >= 4 and fields[1].replace("\\040", " ") == str(mount_point):
            entry = fields
    if entry is None:
        return None, f"no mount on {mount_point} in {mounts}"
    match = re.search(r"(?:^|,)size=(\d+)([kmgt]?)(?:,|$)", entry[3], re.I)
    if not match:
        return None, f"{entry[2]} without a size option"
    number, unit = match.groups()
    return int(number) * _UNITS[unit.lower()], f"mount option size={number}{unit}"


def _size(ctx: Context) -> tuple[Check, dict[str, int | None]]:
    shm = ctx.machine.shm
    size, source = mounted_size(ctx.machine.mounts, shm)
    fs = filesystem(shm, ctx.machine.statvfs, ctx.bound(STATVFS_S))
    if size is None and "total" in fs:
        size, source = fs["total"], "statvfs"
    free = fs.get("free")
    facts = {"size": size, "free": free}
    if size is None:
        return Check("shm.size", "warn", f"size of {shm} unknown: {source}; "
                     f"{fs.get('error', '')}".rstrip("; "), "`df -h /dev/shm` shows it"), facts
    said = f"{shm} is {_mb(size)} ({source})"
    if free is not None:
        said += f", {_mb(free)} free"
    fix = ("give the container more: `docker run --shm-size=16g` (or `--ipc=host`); on "
           "Kubernetes mount an emptyDir with medium: Memory at /dev/shm")
    if size < FAIL_BELOW:
        return Check("shm.size", "fail", f"{said}: too small for NCCL (Docker's default is "
                     "64 MB)", fix), facts
    if free is not None and free < FREE_FAIL_BELOW:
        return Check("shm.size", "fail", f"{said}: nearly full",
                     f"remove what fills it (`ls -la {shm}`), or make it bigger"), facts
    if size < WARN_BELOW:
        return Check("shm.size", "warn", f"{said}: small for several ranks per node", fix), facts
    return Check("shm.size", "ok", said), facts


def _stale_segments(ctx: Context) -> Check:
    shm = ctx.machine.shm
    try:
        segments = sorted(p for p in shm.iterdir() if p.name.startswith("nccl-"))
    except OSError as exc:
        return Check("shm.stale_segments", "skip", f"cannot list {shm}: {exc.strerror}")
    if not segments:
        return Check("shm.stale_segments", "ok", f"no nccl-* segments in {shm}")
    holders = find_holders(ctx.machine.proc, {str(p) for p in segments}, maps=True)
    stale = [p for p in segments if str(p) not in holders.pids]
    held = sorted({pid for pids in holders.pids.values() for pid in pids})
    if not stale:
        return Check("shm.stale_segments", "warn",
                     f"{len(segments)} nccl-* segments in use by "
                     f"{', '.join(describe_pid(ctx.machine.proc, p) for p in held[:SHOWN])}: "
                     "a NCCL job is running on this node",
                     "make sure that job is meant to share the node with the next one")
    total = sum(_size_of(p) for p in stale)
    names = " ".join(str(p) for p in stale[:SHOWN]) + (" ..." if len(stale) > SHOWN else "")
    return Check("shm.stale_segments", "warn",
                 f"{len(stale)} nccl-* segments ({_mb(total)}) no process holds, left by a run "
                 f"that died{unreadable_note(holders)}",
                 f"remove them: rm {names}")


def _size_of(path: Path) -> int:
    with contextlib.suppress(OSError):
        return path.stat().st_size
    return 0


def _mb(size: int) -> str:
    if size >= 2**30:
        return f"{size / 2**30:.1f} GiB"
    return f"{size / MIB:.0f} MiB"
