"""A healthy job: a line every --every seconds for --seconds, then exits with --exit (or is
killed by the signal --die-by)."""

from __future__ import annotations

import argparse
import os
import signal
import time

parser = argparse.ArgumentParser()
parser.add_argument("--seconds", type=float, default=3.0)
parser.add_argument("--every", type=float, default=1.0)
parser.add_argument("--exit", type=int, default=0)
parser.add_argument("--die-by", default="")
args = parser.parse_args()

start = time.monotonic()
step = 0
while time.monotonic() - start < args.seconds:
    step += 1
    print(f"step {step} loss {1.0 / step:.4f}")
    time.sleep(args.every)
if args.die_by:
    os.kill(os.getpid(), getattr(signal, args.die_by))
raise SystemExit(args.exit)
