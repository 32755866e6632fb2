"""Data: the files the job will read exist, can be read and look like what their names say; no
Hugging Face datasets lock, held or stale, will make the job wait (`hflocks`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from hangwatch.doctor import hflocks
from hangwatch.doctor.model import Check, Context, Outcome

SNIFF_BYTES = 1 << 20


def run(ctx: Context) -> Outcome:
    return [_files(ctx.options.data), *hflocks.check(ctx)], {}


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
