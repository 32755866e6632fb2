"""Data: the files the job will read exist, can be read and look like what their names say; no
Hugging Face datasets lock is held by a build that will make the job wait.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

from hangwatch.doctor.holders import describe_pid, find_holders
from hangwatch.doctor.model import Check, Context, Outcome

SNIFF_BYTES = 1 << 20
MAX_LOCKS = 2000  # lock files looked at; a cache holds a handful per dataset
MAX_DEPTH = 5
SHOWN = 3


def run(ctx: Context) -> Outcome:
    return [_files(ctx.options.data), _hf_locks(ctx)], {}


def _files(paths: tuple[Path, ...]) -> Check:
    if not paths:
        return Check("data.files", "skip", "no --data given")
    problems = [f"{p}: {problem}" for p in paths if (problem := file_problem(p))]
    if problems:
        return Check("data.files", "fail", "; ".join(problems),
                     "fix the paths the job reads, or finish writing those files")
    return Check("data.files", "ok", f"{len(paths)} path(s) present and readable")


def file_problem(path: Path) -> str | None:
    """What is wrong with a data file or folder the job will read, or None."""
    if not path.exists():
        return "no such file or folder"
    if path.is_dir():
        try:
            return None if any(True for _ in os.scandir(path)) else "empty folder"
        except OSError as exc:
            return f"cannot list: {exc.strerror}"
    try:
        with path.open("rb") as f:
            head = f.read(SNIFF_BYTES)
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - SNIFF_BYTES))
            tail = f.read()
    except OSError as exc:
        return f"cannot read: {exc.strerror}"
    if size == 0:
        return "empty file"
    return _sniff(path.suffix.lower(), head, tail)


def _sniff(suffix: str, head: bytes, tail: bytes) -> str | None:
    if suffix == ".parquet":
        if head[:4] != b"PAR1":
            return "not a parquet file (no PAR1 magic at the start)"
        if tail[-4:] != b"PAR1":
            return "parquet file without its footer (truncated, or still being written)"
    elif suffix in (".jsonl", ".ndjson"):
        # A line longer than what was read cannot be judged: only whole lines are parsed.
        whole_file = len(tail) < SNIFF_BYTES
        if (whole_file or b"\n" in head) and not _is_json(head.split(b"\n", 1)[0]):
            return "first line is not JSON"
        body = tail.rstrip(b"\n")
        if (whole_file or b"\n" in body) and not _is_json(body.rsplit(b"\n", 1)[-1]):
            return "last line is not JSON (truncated, or still being written)"
    elif suffix == ".json" and head.lstrip()[:1] not in (b"{", b"["):
        return "does not start like JSON ({ or [)"
    return None


def _is_json(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def _cache_dir(ctx: Context) -> Path:
    env = ctx.env
    if env.get("HF_DATASETS_CACHE"):
        return Path(env["HF_DATASETS_CACHE"])
    hf_home = Path(env["HF_HOME"]) if env.get("HF_HOME") else (
        ctx.machine.home / ".cache" / "huggingface")
    return hf_home / "datasets"


def _hf_locks(ctx: Context) -> Check:
    cache = _cache_dir(ctx)
    if not cache.is_dir():
        return Check("data.hf_locks", "skip", f"no Hugging Face datasets cache at {cache}")
    locks = list(_lock_files(cache))
    held = [lock for lock in locks if _is_held(lock)]
    if not held:
        return Check("data.hf_locks", "ok", f"{len(locks)} lock file(s) in {cache}, none held")
    holders = find_holders(ctx.machine.proc, {str(p) for p in held})
    described = []
    for lock in held[:SHOWN]:
        pids = holders.pids.get(str(lock), [])
        who = ", ".join(describe_pid(ctx.machine.proc, p) for p in pids) or (
            "a process not visible here (another node sharing the cache, or another user)")
        described.append(f"{lock.name} held by {who}")
    return Check("data.hf_locks", "warn",
                 f"{len(held)} datasets lock(s) held: {'; '.join(described)}; the job will "
                 "wait on them",
                 "let that build finish, or end it if it is left from an earlier run; on a "
                 "cache shared over NFS, give each node its own HF_DATASETS_CACHE")


def _lock_files(root: Path) -> Iterator[Path]:
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


def _is_held(lock: Path) -> bool:
    """datasets locks with flock(2): try it without waiting, and let go at once."""
    try:
        fd = os.open(lock, os.O_RDONLY)
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
