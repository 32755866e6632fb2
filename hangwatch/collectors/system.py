"""The machine around the job: load, memory, swap, the log's filesystem, /dev/shm, open files.

A full /dev/shm hangs NCCL and DataLoader workers; a full disk blocks the writer of the log or
a checkpoint. `statvfs` on a dead network mount never returns, so each one is bounded.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psutil

from hangwatch.collectors.bounded import Background

StatVFS = Callable[[str], os.statvfs_result]


def collect_system(log_paths: Sequence[Path] = (), *, proc_root: Path = Path("/proc"),
                   shm_path: Path = Path("/dev/shm"), statvfs: StatVFS = os.statvfs,
                   fs_timeout: float = 3.0, cpu_sample: float = 0.3) -> dict[str, Any]:
    memory = psutil.virtual_memory()
    swap = psutil.swap_memory()
    return {
        "load": [round(x, 2) for x in os.getloadavg()],
        "cpu_count": os.cpu_count(),
        "cpu_percent": psutil.cpu_percent(interval=cpu_sample),
        "memory": {"total": memory.total, "available": memory.available,
                   "used_percent": memory.percent},
        "swap": {"total": swap.total, "used": swap.used, "used_percent": swap.percent},
        "open_files": _open_files(proc_root),
        "shm": filesystem(shm_path, statvfs, fs_timeout),
        "filesystems": [filesystem(p, statvfs, fs_timeout) for p in log_paths],
    }


def filesystem(path: Path, statvfs: StatVFS, timeout: float) -> dict[str, Any]:
    """Size and use of the filesystem holding `path`, as `df` counts them."""
    value, error = Background(lambda: statvfs(str(_existing(path))), "statvfs").result(timeout)
    if value is None:
        if error == "timed out":
            error = f"statvfs did not answer within {timeout:g}s (a hung network mount?)"
        return {"path": str(path), "error": error}
    total = value.f_blocks * value.f_frsize
    free = value.f_bavail * value.f_frsize
    used = (value.f_blocks - value.f_bfree) * value.f_frsize
    # `df`: used / (used + available to users); root's reserve does not count as free.
    percent = round(100 * used / (used + free), 1) if used + free else 0.0
    return {"path": str(path), "total": total, "used": used, "free": free,
            "used_percent": percent, "fsid": getattr(value, "f_fsid", None)}


def _existing(path: Path) -> Path:
    """The log itself, or the nearest folder above it that exists (it may not be written yet)."""
    for candidate in (path, *path.absolute().parents):
        if candidate.exists():
            return candidate
    return path


def _open_files(proc_root: Path) -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    out: dict[str, Any] = {"soft_limit": soft, "hard_limit": hard}
    try:
        allocated, _, maximum = (proc_root / "sys/fs/file-nr").read_text().split()[:3]
        out.update(system_open=int(allocated), system_max=int(maximum))
    except (OSError, ValueError):
        pass  # not Linux: the per-process limits above still tell the story
    return out
