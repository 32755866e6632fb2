"""Free disk where logs, checkpoints and reports will be written: a full disk blocks the writer,
and a job blocked on write looks exactly like a hang."""

from __future__ import annotations

from pathlib import Path

from hangwatch.collectors.system import filesystem
from hangwatch.doctor.model import Check, Context, Outcome

GIB = 2**30
FAIL_FREE = 1 * GIB
WARN_FREE = 10 * GIB
WARN_PERCENT = 95.0
STATVFS_S = 3.0


def run(ctx: Context) -> Outcome:
    checks, facts = [], {}
    seen: set[int] = set()
    for path in ctx.options.disk:
        fs = filesystem(path, ctx.machine.statvfs, ctx.bound(STATVFS_S))
        if "error" in fs:
            checks.append(Check("disk.free", "fail", f"{path}: {fs['error']}",
                                "check the mount (a hung NFS server?) before writing there"))
            continue
        if fs["fsid"] is not None:  # one line per filesystem, however many paths it holds
            if fs["fsid"] in seen:
                continue
            seen.add(fs["fsid"])
        facts[str(path)] = fs["free"]
        checks.append(_judge(path, fs))
    return checks, {"disk_free": facts}


def _judge(path: Path, fs: dict[str, int | float]) -> Check:
    free, percent = fs["free"], fs["used_percent"]
    said = f"{path}: {free / GIB:.1f} GiB free ({percent:g}% used)"
    if free < FAIL_FREE:
        return Check("disk.free", "fail", f"{said}: a log or checkpoint write would block",
                     "free space or write logs and checkpoints elsewhere")
    if free < WARN_FREE or percent >= WARN_PERCENT:
        return Check("disk.free", "warn", f"{said}: checkpoints may not fit",
                     "free space before a long run")
    return Check("disk.free", "ok", said)
