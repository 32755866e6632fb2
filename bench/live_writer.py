"""Append generated log lines at a fixed rate; every MARK_EVERY-th line carries its write
time (time.monotonic(), the same clock in every process) for the reader to measure lag.

`python bench/live_writer.py LOG RATE SECONDS [--rotate-every S]`
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import loggen

MARK_EVERY = 1000
TICK_S = 0.01  # write a batch this often
MARK = b"bench-mark t="


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("log", type=Path)
    parser.add_argument("rate", type=int, help="lines per second")
    parser.add_argument("seconds", type=float)
    parser.add_argument("--rotate-every", type=float, default=0.0,
                        help="rename the log to LOG.1 this often (long runs stay small)")
    args = parser.parse_args()
    per_batch = max(1, int(args.rate * TICK_S))
    # Lines are made ahead of time so that writing them costs the writer little.
    source = loggen.LogWriter(seed=5).lines(loggen.MIXES["nccl-info"])
    pool = [next(source).replace("\r", " ").encode() + b"\n" for _ in range(50_000)]
    fd = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    start = time.monotonic()
    rotated = start
    written = 0
    i = 0
    while (now := time.monotonic()) - start < args.seconds:
        due = int((now - start) * args.rate) + per_batch
        chunk: list[bytes] = []
        while written < due:
            if written % MARK_EVERY == 0:
                chunk.append(MARK + f"{time.monotonic():.6f}\n".encode())
            else:
                chunk.append(pool[i])
                i = (i + 1) % len(pool)
            written += 1
        os.write(fd, b"".join(chunk))
        if args.rotate_every and now - rotated >= args.rotate_every:
            os.close(fd)
            os.replace(args.log, args.log.with_suffix(".1"))
            fd = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            rotated = now
        time.sleep(max(0.0, start + (written / args.rate) - time.monotonic()))
    os.close(fd)
    print(written)
    return 0


if __name__ == "__main__":
    sys.exit(main())
