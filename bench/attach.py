"""Benchmark: a long per-step run (bench/steplog.py), read after the fact and attached to.

- `check` MB/s on the log, against GNU grep with the patterns a person would write for the
  same lines, in the user's locale, measured in the same run;
- µs per state change: `check` on two logs of the same size, one event every `density`
  lines against one every 100x as many, the difference in time over the difference in events;
- attach: `hangwatch LOG --json` started on the log (last written two hours ago): seconds
  until the stall event that names the phase and step the log ends in.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import manyrules
import steplog
from common import PYTHON, REPO, Row, Series, note, run_timed

DENSITY = 25
SPARSE = DENSITY * 100
# What a person greps for to find the same lines: phase markers, the sync, steps and bars.
GREP = r"\[(ROLLOUT|ACTOR|SYNC)\]|step:[0-9]+ - |Training Progress|Processed prompts"
CHECK_GOAL = 12.0  # x grep
ATTACH_GOAL_S = 5.0
AGE_S = 7200  # the log was last written this long ago: past any stall threshold
EXPECTED = steplog.STOPS["sync-rollout"]


def run(tmp: Path, size: int, runs: int) -> list[Row]:
    cache = {"HANGWATCH_CACHE_DIR": str(tmp / "cache")}
    dense, sparse = tmp / "steps.log", tmp / "steps-sparse.log"
    note(f"writing {size >> 20} MiB per-step logs (an event every {DENSITY} and {SPARSE} lines)")
    events = {log: steplog.generate(log, size, density=density) * steplog.EVENTS_PER_STEP
              for log, density in ((dense, DENSITY), (sparse, SPARSE))}
    for log in (dense, sparse):
        aged(log)
    mb = dense.stat().st_size / 1e6
    tiny = tmp / "tiny-steps.log"  # compiles the rules into the cache before any timing
    tiny.write_text("step:1 - loss:0.5\n")
    run_timed([PYTHON, "-m", "hangwatch", "check", str(tiny)], env=cache)
    check, check_sparse, grep, attach = Series(), Series(), Series(), Series()
    for i in range(runs):  # interleaved, so that noise from other work hits all alike
        note(f"per-step run {i + 1}/{runs}")
        g = run_timed(["grep", "-cE", GREP, str(dense)])
        if g.rc not in (0, 1):
            raise RuntimeError(f"grep failed: {g.stderr.strip()}")
        grep.add(g.wall)
        for log, series in ((dense, check), (sparse, check_sparse)):
            c = run_timed([PYTHON, "-m", "hangwatch", "check", "--json", str(log)], env=cache)
            if c.rc != 3:
                raise RuntimeError(f"check {log.name}: exit {c.rc}: {c.stderr[-2000:]}")
            series.add(c.wall)
        attach.add(attach_s(dense, tmp, cache))
    ratio = check.median / grep.median
    extra = events[dense] - events[sparse]
    per_change = (check.median - check_sparse.median) / extra * 1e6 if extra > 0 else 0.0
    what = f"{size >> 20} MiB per-step log"
    return [
        Row("per-step", f"{what}: check vs grep -E (person's patterns, {locale()})",
            f"{check.text()} = {mb / check.median:.0f} MB/s", f"{grep.text()} = "
            f"{mb / grep.median:.0f} MB/s", f"{ratio:.1f}x", f"<= {CHECK_GOAL:g}x",
            ratio <= CHECK_GOAL),
        Row("per-step", f"{what}: cost of a state change ({events[dense]:,} vs "
            f"{events[sparse]:,} events)", f"{per_change:.1f} µs",
            f"sparse: {check_sparse.text()}", f"{check.median / check_sparse.median:.2f}x"),
        Row("per-step", f"{what}: attach, until the stall names {EXPECTED.phase}/"
            f"{EXPECTED.step}", attach.text(), f"grep: {grep.text()}",
            f"{attach.median / grep.median:.0f}x", f"<= {ATTACH_GOAL_S:g} s",
            attach.median <= ATTACH_GOAL_S),
        *manyrules.ratio(dense, runs=min(runs, 2)),
    ]


def aged(log: Path) -> None:
    then = time.time() - AGE_S
    os.utime(log, (then, then))


def locale() -> str:
    return os.environ.get("LC_ALL") or os.environ.get("LANG") or "C"


def attach_s(log: Path, tmp: Path, cache: dict[str, str], timeout: float = 600) -> float:
    """Seconds from starting `hangwatch LOG --json` to the stall event naming the open phase
    and step; raises when it names another place or never comes."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **cache}
    argv = [PYTHON, "-m", "hangwatch", str(log), "--json", "--no-snapshot",
            "--report-dir", str(tmp / "reports")]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env, cwd=REPO, text=True)
    assert proc.stdout is not None
    killer = threading.Timer(timeout, proc.kill)  # never wait forever on a silent watcher
    killer.start()
    try:
        for line in proc.stdout:
            event = json.loads(line)
            if event["event"] != "stall":
                continue
            took = time.perf_counter() - start
            if (event["phase"], event.get("step")) != (EXPECTED.phase, EXPECTED.step):
                raise RuntimeError(f"attach named {event['phase']}/{event.get('step')}")
            return took
        raise RuntimeError("attach: no stall event")
    finally:
        killer.cancel()
        proc.kill()
        proc.wait()
