"""Benchmark: a user pack of many phases (generated per-step markers) costs what the lines
hit, not lines times rules: each line of the log starts the next phase."""

from __future__ import annotations

import time
from pathlib import Path

from common import Row

from hangwatch.core.clock import FakeClock
from hangwatch.core.engine import Engine
from hangwatch.core.events import PhaseEvent
from hangwatch.core.prefilter import try_build
from hangwatch.core.rules import RuleSet
from hangwatch.packs.load import load_pack_text, load_rule_set

PHASES = 6000
GOAL_S = 1.0  # for PHASES lines (19 s when each new set of hits walked every rule)
FEW = 60
RATIO_GOAL = 3.0  # a pack of PHASES phases against one of FEW, on the same per-step log
BLOCK = 1 << 20


def pack(phases: int) -> str:
    rules = "".join(f"  - id: step_{i}\n    title: Step {i}\n    start: 'marker {i} begins$'\n"
                    for i in range(phases))
    return f"pack: generated\nphases:\n{rules}"


def _read_s(rules: RuleSet, data: bytes) -> float | None:
    """CPU seconds to read `data` in the follower's blocks (databases compiled first, as
    the cache on disk keeps them); None when Hyperscan refuses the rules."""
    prefilter, _ = try_build(rules)
    if prefilter is None:
        return None
    Engine(rules, default_stall=600.0, clock=FakeClock(), prefilter=prefilter).feed_block(
        "log", data[:data.index(b"\n", BLOCK) + 1])
    engine = Engine(rules, default_stall=600.0, clock=FakeClock(), prefilter=prefilter)
    start = time.process_time()
    pos = 0
    while pos < len(data):
        cut = data.find(b"\n", pos + BLOCK)
        end = len(data) if cut < 0 else cut + 1
        engine.feed_block("log", data[pos:end])
        pos = end
    return time.process_time() - start


def ratio(log: Path, runs: int = 2, limit: int = 20 << 20) -> list[Row]:
    """The built-in packs with a user pack of PHASES phases against one of FEW, on the same
    per-step log (its first `limit` bytes; none of the generated markers in it): what a big
    pack costs by itself."""
    data = log.read_bytes()[:limit]
    data = data[:data.rindex(b"\n") + 1]
    builtin = list(load_rule_set().packs)
    times = {}
    for phases in (FEW, PHASES):
        rules = RuleSet([*builtin, load_pack_text(pack(phases), "generated.yaml")])
        taken = [_read_s(rules, data) for _ in range(runs)]
        if any(t is None for t in taken):
            return [Row("catch-up", f"a pack of {phases:,} phases on a per-step log",
                        "refused by Hyperscan")]
        times[phases] = min(t for t in taken if t is not None)
    times_x = times[PHASES] / times[FEW]
    return [Row("catch-up", f"a pack of {PHASES:,} phases against one of {FEW}, same per-step "
                f"log ({len(data) >> 20} MiB, CPU s)", f"{times[PHASES]:.2f} s",
                f"{times[FEW]:.2f} s", f"{times_x:.2f}x", f"<= {RATIO_GOAL:g}x",
                times_x <= RATIO_GOAL)]


def run(phases: int = PHASES) -> list[Row]:
    rules = RuleSet([load_pack_text(pack(phases), "generated.yaml")])
    prefilter, status = try_build(rules)
    if prefilter is None:
        return [Row("catch-up", f"a pack of {phases:,} phases", status)]
    data = "".join(f"marker {i} begins\n" for i in range(phases)).encode()
    # The databases a block compiles when it first needs them are compiled beforehand, as
    # the cache on disk keeps them between runs: what is timed is reading the lines.
    Engine(rules, default_stall=600.0, clock=FakeClock(), prefilter=prefilter).feed_block(
        "log", data[:4096])
    engine = Engine(rules, default_stall=600.0, clock=FakeClock(), prefilter=prefilter)
    start = time.perf_counter()
    events = engine.feed_block("log", data)
    took = time.perf_counter() - start
    started = sum(isinstance(e, PhaseEvent) and e.state == "started" for e in events)
    return [Row("catch-up", f"a pack of {phases:,} phases: {phases:,} lines, each starting one",
                f"{took:.2f} s, {started:,} phases started", "", "",
                f"< {GOAL_S:g} s", took < GOAL_S and started == phases)]
