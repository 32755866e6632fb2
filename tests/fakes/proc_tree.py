"""A fake /proc tree on disk, shaped like the real one, for discovery's edge cases."""

from __future__ import annotations

import os
from pathlib import Path

O_RDONLY = 0o100000  # the `flags:` of /proc/PID/fdinfo/N, as the kernel prints them (octal)
O_WRONLY_APPEND = 0o102001


def add_process(root: Path, pid: int, *, comm: str, ppid: int = 1, pgrp: int | None = None,
                session: int | None = None, cmdline: str = "",
                fds: dict[int, tuple[str, int]] | None = None) -> None:
    """`fds`: fd -> (link target, fdinfo flags); a target may be a file path or `pipe:[N]`."""
    d = root / str(pid)
    (d / "fd").mkdir(parents=True)
    (d / "fdinfo").mkdir()
    pgrp = pid if pgrp is None else pgrp
    session = pgrp if session is None else session
    (d / "stat").write_text(f"{pid} ({comm}) S {ppid} {pgrp} {session} 0 -1 4194560 0 0\n")
    (d / "cmdline").write_bytes(cmdline.replace(" ", "\0").encode() + b"\0")
    for fd, (target, flags) in (fds or {}).items():
        os.symlink(target, d / "fd" / str(fd))
        (d / "fdinfo" / str(fd)).write_text(f"pos:\t0\nflags:\t0{flags:o}\nmnt_id:\t1\n")
