"""Benchmark 2 (and 4, memory while following): keep up with a log written at 100,000
lines a second, using little CPU, with flat memory."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
from pathlib import Path

from common import PYTHON, REPO, Row

RATE = 100_000
LAG_GOAL_S = 1.0
CPU_GOAL = 0.5  # of one core
FLAT_MB = 10.0  # how much RSS may grow from the first minute... of sampling to the end


def run(tmp: Path, seconds: float, *, rotate_every: float = 0.0) -> list[Row]:
    log = tmp / "live.log"
    log.touch()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    bench = str(REPO / "bench")
    worker = subprocess.Popen([PYTHON, f"{bench}/live_worker.py", str(log)], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert worker.stdin is not None and worker.stdout is not None
    if worker.stdout.readline().strip() != "ready":
        raise RuntimeError("live worker did not start")
    argv = [PYTHON, f"{bench}/live_writer.py", str(log), str(RATE), str(seconds)]
    if rotate_every:
        argv += ["--rotate-every", str(rotate_every)]
    written = int(subprocess.run(argv, env=env, check=True, capture_output=True,
                                 text=True).stdout)
    worker.stdin.write(f"{written}\n")
    worker.stdin.flush()
    out = json.loads(worker.stdout.readline())
    worker.wait(timeout=30)
    lags = sorted(out["lags"])
    p50, p99 = lags[len(lags) // 2], lags[int(len(lags) * 0.99)]
    share = out["cpu_s"] / out["wall_s"]
    rss = out["rss_mb"]
    settled = rss[min(len(rss) - 1, 5):]  # after the first seconds of warming up
    growth = settled[-1] - settled[0]
    what = f"{RATE:,} lines/s for {seconds:g} s"
    return [
        Row("follow", f"{what}: lag write->processed, p99 (p50, max)",
            f"{p99:.3f} s ({p50:.3f}, {lags[-1]:.3f})", "", "", f"p99 < {LAG_GOAL_S} s",
            p99 < LAG_GOAL_S),
        Row("follow", f"{what}: CPU share of one core", f"{share * 100:.0f} %", "", "",
            f"< {CPU_GOAL * 100:.0f} %", share < CPU_GOAL),
        Row("follow", f"{what}: lines processed / written",
            f"{out['lines']:,} / {written:,}", "", "", "all", out["lines"] == written),
        Row("memory", f"{what}: RSS while following (start .. end, peak)",
            f"{settled[0]:.0f} .. {settled[-1]:.0f} MB, peak {max(rss):.0f} MB", "",
            f"{statistics.median(rss):.0f} MB median", f"grows < {FLAT_MB:.0f} MB",
            growth < FLAT_MB),
    ]
