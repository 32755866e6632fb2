"""Benchmark 3: a silent log costs (almost) no CPU, and the stall fires on time.

Runs a real `hangwatch LOG --stall S --json --exit-on-stall --no-snapshot` on a log that
stops being written as the watch starts. CPU is read with psutil over the quiet stretch
(from SETTLE_S after the start, once rules are loaded and the file read, to shortly before
the deadline); the deadline is the log's last write plus S.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import psutil
from common import PYTHON, REPO, Row

CPU_GOAL = 0.002  # of one core
ON_TIME_S = 0.5
SETTLE_S = 3.0


def run(tmp: Path, stall_s: float) -> list[Row]:
    log = tmp / "quiet.log"
    log.write_text("".join(f"step {i}: loading shard {i} of 8\n" for i in range(8)))
    deadline = log.stat().st_mtime + stall_s
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [PYTHON, "-m", "hangwatch", str(log), "--stall", f"{stall_s:g}s", "--json",
            "--exit-on-stall", "--no-snapshot", "--report-dir", str(tmp / "reports")]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            cwd=tmp)
    stall_at: list[float] = []

    def watch_stdout() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if json.loads(line).get("event") == "stall" and not stall_at:
                stall_at.append(time.time())

    reader = threading.Thread(target=watch_stdout, daemon=True)
    reader.start()
    ps = psutil.Process(proc.pid)
    time.sleep(min(SETTLE_S, stall_s / 3))
    t0, c0 = time.monotonic(), _cpu(ps)
    time.sleep(max(0.5, deadline - time.time() - 1.0))
    t1, c1 = time.monotonic(), _cpu(ps)
    try:
        rc = proc.wait(timeout=stall_s + 10)
    finally:
        proc.kill()
    reader.join(2)
    share = (c1 - c0) / (t1 - t0)
    late = stall_at[0] - deadline if stall_at else float("inf")
    err = proc.stderr.read().decode() if proc.stderr else ""
    if rc != 3:
        raise RuntimeError(f"hangwatch exited {rc}, not 3 (stall): {err[-400:]}")
    return [
        Row("quiet", f"silent log, {t1 - t0:.0f} s: CPU share of one core",
            f"{share * 100:.3f} %", "", "", f"< {CPU_GOAL * 100:g} %", share < CPU_GOAL),
        Row("quiet", f"stall event after its deadline (--stall {stall_s:g}s)",
            f"{late:+.2f} s", "", "", f"within {ON_TIME_S} s", abs(late) <= ON_TIME_S),
    ]


def _cpu(ps: psutil.Process) -> float:
    times = ps.cpu_times()
    return times.user + times.system
