"""Follow a log with hangwatch's Follower and Engine, as the watch loop does, and measure
how late each marked line is processed. Prints "ready" once set up; reads from stdin how
many lines the writer wrote, and once it has processed them all (or DRAIN_S passed), prints
one JSON line.

`python bench/live_worker.py LOG`
"""

from __future__ import annotations

import json
import queue
import resource
import sys
import threading
import time
from pathlib import Path

from live_writer import MARK

from hangwatch.packs.load import load_rule_set
from hangwatch.session.engines import build_engine
from hangwatch.sources.feed import Block
from hangwatch.sources.follow import Follower

SAMPLE_S = 1.0
DRAIN_S = 10.0


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() / 2**20


def marks(data: bytes) -> list[float]:
    found = []
    i = data.find(MARK)
    while i >= 0:
        end = data.index(b"\n", i)
        found.append(float(data[i + len(MARK):end]))
        i = data.find(MARK, end)
    return found


def main() -> int:
    log = Path(sys.argv[1])
    rules = load_rule_set()
    engine = build_engine(rules, 600.0)  # as `hangwatch watch` builds it
    status = engine.prefilter.status if engine.prefilter else "off"
    if engine.prefilter is not None:
        # What is measured is following; compiling rules not yet in the cache (seconds, after
        # the rules change) is measured by the catch-up benchmark's first run.
        engine.prefilter.warm()
    items: queue.Queue = queue.Queue(maxsize=64)
    follower = Follower(log, items)
    expected: list[int] = []
    threading.Thread(target=lambda: expected.append(int(sys.stdin.readline())),
                     daemon=True).start()
    follower.start()
    print("ready", flush=True)
    lags: list[float] = []
    rss: list[float] = []
    lines = 0
    cpu0, wall0 = cpu_s(), time.monotonic()
    next_sample = wall0
    give_up = float("inf")
    while not (expected and (lines >= expected[0] or time.monotonic() > give_up)):
        if expected and give_up == float("inf"):
            give_up = time.monotonic() + DRAIN_S
        try:
            item = items.get(timeout=0.2)
        except queue.Empty:
            continue
        if isinstance(item, Block):
            engine.feed_block(item.path, item.data)
            done = time.monotonic()
            lines += item.data.count(b"\n")
            lags.extend(done - t for t in marks(item.data))
        engine.tick()
        if time.monotonic() >= next_sample:
            rss.append(rss_mb())
            next_sample += SAMPLE_S
    cpu, wall = cpu_s() - cpu0, time.monotonic() - wall0
    follower.stop()
    print(json.dumps({"prefilter": status, "lines": lines, "lags": lags, "cpu_s": cpu,
                      "wall_s": wall, "rss_mb": rss}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
