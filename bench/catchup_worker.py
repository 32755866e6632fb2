"""Read one log the way `hangwatch check` does, with or without the prefilter.

Run by catchup.py in its own process so that its time and peak memory are its own:
`python bench/catchup_worker.py LOG [--simple]` prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from hangwatch.commands.check import read_log
from hangwatch.core.clock import SystemClock
from hangwatch.core.engine import Engine
from hangwatch.packs.load import load_rule_set
from hangwatch.session.engines import build_engine


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("log", type=Path)
    parser.add_argument("--simple", action="store_true", help="match line by line")
    args = parser.parse_args()
    start = time.perf_counter()
    rules = load_rule_set()
    engine = (Engine(rules, default_stall=600.0, clock=SystemClock()) if args.simple
              else build_engine(rules, 600.0))  # as `hangwatch check` builds it
    status = engine.prefilter.status if engine.prefilter else "off"
    ready = time.perf_counter()
    read_log(engine, args.log)
    done = time.perf_counter()
    print(json.dumps({"prefilter": status, "lines": sum(engine.lines.values()),
                      "setup_s": ready - start, "read_s": done - ready,
                      "timeline": len(engine.timeline()), "signals": len(engine.signals)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
