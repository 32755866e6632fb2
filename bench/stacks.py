"""Benchmark: from "collect now" to stack groups, for 8, 16 and 32 real blocked Python
processes (ranks with RANK in their environment; one of them blocked elsewhere), against one
`py-spy dump` of one process timed in the same run as the reference.

`python bench/stacks.py [--sizes 8,16,32] [--runs 3]`. The goal: 32 processes within 10 s on
2 cores, the odd rank named.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hangwatch.collectors.bounded import run_command
from hangwatch.collectors.stackgroups import (
    StackOptions,
    collect_groups,
)
from hangwatch.collectors.stacks import find_py_spy
from hangwatch.packs.load import load_rule_set

RANK = """
import os, sys, time
def all_reduce_that_never_returns():
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    time.sleep(1e9)
def load_next_batch():
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    os.read(os.pipe()[0], 1)
(load_next_batch if os.environ["RANK"] == "1" else all_reduce_that_never_returns)()
"""
GOAL_S = 10.0


def start(n: int) -> list[subprocess.Popen[str]]:
    procs = [subprocess.Popen([sys.executable, "-c", RANK], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "RANK": str(r), "WORLD_SIZE": str(n)})
             for r in range(n)]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
    return procs


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="8,16,32")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rules = load_rule_set().stack_rules
    py_spy = find_py_spy()
    if py_spy is None:
        print("py-spy not found")
        return 2
    print(f"{'processes':>9}  {'groups (median)':>15}  {'one py-spy dump':>15}  "
          f"{'ratio':>6}  goal  suspect")
    ok = True
    for n in (int(s) for s in args.sizes.split(",")):
        procs = start(n)
        try:
            single, took = [], []
            suspect = ""
            for _ in range(args.runs):
                t0 = time.perf_counter()
                run_command([py_spy, "dump", "--pid", str(procs[0].pid)], 10)
                single.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                result = collect_groups([p.pid for p in procs], rules=rules, py_spy=py_spy,
                                        options=StackOptions(budget=GOAL_S))
                took.append(time.perf_counter() - t0)
                suspect = "; ".join(f"rank {s.rank} in {s.where}" for s in result.groups.suspects)
            met = median(took) < GOAL_S and suspect == "rank 1 in load_next_batch (<string>)"
            ok &= met
            print(f"{n:>9}  {median(took):>13.2f} s  {median(single):>13.3f} s  "
                  f"{median(took) / median(single):>5.1f}x  {'ok' if met else 'MISS'}  "
                  f"{suspect or 'none'}")
        finally:
            for p in procs:
                p.kill()
                p.wait()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
