"""The prefilter must not change a single event: feed the same log both ways and compare."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hangwatch.core.clock import FakeClock
from hangwatch.core.engine import Engine
from hangwatch.core.events import Event, StallEvent
from hangwatch.core.lines import LineSplitter
from hangwatch.core.prefilter import Prefilter
from hangwatch.core.rules import RuleSet

READ_SIZE = 1 << 20
STALL_S = 30.0
STALL_EVERY = 4  # blocks: now and then the clock jumps past the threshold between two reads


@dataclass(frozen=True)
class Verdict:
    same: bool
    lines: int
    events: int
    fast_s: float
    simple_s: float
    first_difference: str


def feed(rules: RuleSet, prefilter: Prefilter | None, log: Path,
         limit: int) -> tuple[list[Event], dict[str, Any], float]:
    """Events and final state from reading up to `limit` bytes of `log` (a fake clock, so
    both runs stamp the same times; it jumps now and then, so stalls and recoveries too)."""
    clock = FakeClock()
    engine = Engine(rules, default_stall=STALL_S, clock=clock, prefilter=prefilter)
    splitter = LineSplitter()
    events: list[Event] = []
    read = blocks = 0
    start = time.perf_counter()
    with log.open("rb") as fh:
        while read < limit and (chunk := fh.read(min(READ_SIZE, limit - read))):
            read += len(chunk)
            blocks += 1
            events += engine.feed_block("log", splitter.push(chunk))
            clock.advance(STALL_S + 1 if blocks % STALL_EVERY == 0 else 0.5)
            events += engine.tick()
    events += engine.feed_block("log", splitter.flush())
    # Per-rank state is what each path saw of lines no rule decides (see
    # docs/reference/ranks.md, Limits); the contract compared here is the rest.
    events = [dataclasses.replace(e, laggards=(), ranks=(), rank_summary="", desync="")
              if isinstance(e, StallEvent) else e for e in events]
    return events, {**engine.state(), "ranks": None}, time.perf_counter() - start


def compare(rules: RuleSet, prefilter: Prefilter, log: Path, limit: int) -> Verdict:
    fast, fast_state, fast_s = feed(rules, prefilter, log, limit)
    simple, simple_state, simple_s = feed(rules, None, log, limit)
    difference = ""
    if fast != simple:
        at = next((i for i, (a, b) in enumerate(zip(fast, simple, strict=False)) if a != b),
                  min(len(fast), len(simple)))
        difference = (f"event {at}: fast {fast[at] if at < len(fast) else None!r} != "
                      f"simple {simple[at] if at < len(simple) else None!r}")
    elif fast_state != simple_state:
        difference = "final state differs"
    return Verdict(not difference, sum(simple_state["lines"].values()), len(simple), fast_s,
                   simple_s, difference)
