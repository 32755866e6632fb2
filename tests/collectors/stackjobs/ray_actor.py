"""A stand-in for a Ray actor process (Ray is not installed here): it retitles itself the way
Ray's workers do (`ray::Trainer.step`, through the argv area, as setproctitle does), then
blocks. `sync` waits on a pipe nobody writes to, in `sync_gradients`; `fetch` waits for a
reply on a socket, in `fetch_shard`. Writes READY_DIR/<pid> once it is about to block."""

from __future__ import annotations

import ctypes
import os
import socket
import sys
from pathlib import Path


def set_title(title: str) -> None:
    fields = Path("/proc/self/stat").read_text().rpartition(")")[2].split()
    start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end: stat fields 48, 49
    raw = title.encode()[: end - start - 1]
    with open("/proc/self/mem", "r+b", buffering=0) as mem:
        mem.seek(start)
        mem.write(raw + b"\0" * (end - start - len(raw)))
    ctypes.CDLL(None).prctl(15, title.encode()[:15], 0, 0, 0)  # PR_SET_NAME: the comm


def ready() -> None:
    (Path(os.environ["READY_DIR"]) / str(os.getpid())).write_text("ready\n")


def sync_gradients() -> None:
    r, _ = os.pipe()
    ready()
    os.read(r, 1)


def fetch_shard() -> None:
    a, _ = socket.socketpair()
    ready()
    a.recv(1)


if __name__ == "__main__":
    set_title(sys.argv[2])
    {"sync": sync_gradients, "fetch": fetch_shard}[sys.argv[1]]()
