"""Benchmark 1 (and 4, memory): read a big log once, against grep with the same patterns."""

from __future__ import annotations

import os
from pathlib import Path

import loggen
import patterns
from common import PYTHON, Row, Series, note, run_timed
from verify import compare

from hangwatch.config import load_rule_set
from hangwatch.core.prefilter import try_build

RATIO_GOAL = 1.5
RSS_GOAL_MB = 80.0
MIXES = ("nccl-info", "dense")  # the goal holds for the first; the second is reported


def warm(log: Path) -> None:
    """Read the file once so every contender finds it in the page cache."""
    with log.open("rb") as fh:
        while fh.read(1 << 24):
            pass


def run(tmp: Path, size: int, runs: int, verify_bytes: int) -> list[Row]:
    rules = load_rule_set()
    prefilter, status = try_build(rules)
    note(f"prefilter: {status}")
    pattern_file = tmp / "patterns.txt"
    mode = patterns.write(pattern_file, patterns.rule_patterns())
    locale = os.environ.get("LC_ALL") or os.environ.get("LANG") or "C"
    rows: list[Row] = []
    for mix in MIXES:
        log = tmp / f"{mix}.log"
        note(f"writing {size >> 20} MiB {mix} log")
        loggen.generate(log, size, mix=mix)
        warm(log)
        mib = f"{size >> 20} MiB {mix}"
        grep_local, grep_c, fast = Series(), Series(), Series()
        rss = Series()
        for i in range(runs):
            note(f"{mix} run {i + 1}/{runs}")
            g = run_timed(patterns.grep_argv(mode, pattern_file, log))
            gc = run_timed(patterns.grep_argv(mode, pattern_file, log), env={"LC_ALL": "C"})
            f = run_timed([PYTHON, "bench/catchup_worker.py", str(log)])
            if f.rc != 0 or g.rc not in (0, 1):
                raise RuntimeError(f"catch-up failed: {f.stderr or g.stderr}")
            grep_local.add(g.wall)
            grep_c.add(gc.wall)
            fast.add(f.wall)
            rss.add(f.max_rss_mb)
        goal = mix == MIXES[0]
        for label, ref in ((f"grep -{mode} ({locale})", grep_local), (f"grep -{mode} (C)", grep_c)):
            ratio = fast.median / ref.median
            rows.append(Row("catch-up", f"{mib}: check vs {label}", fast.text(),
                            ref.text(), f"{ratio:.2f}x",
                            f"<= {RATIO_GOAL}x" if goal else "",
                            ratio <= RATIO_GOAL if goal else None))
        rows.append(Row("memory", f"{mib}: peak RSS of check", rss.text("MB", 0), "", "",
                        f"< {RSS_GOAL_MB:.0f} MB", max(rss.values) < RSS_GOAL_MB))
        if prefilter is not None:
            note(f"{mix}: comparing events with line-by-line matching "
                 f"on the first {verify_bytes >> 20} MiB")
            v = compare(rules, prefilter, log, verify_bytes)
            rows.append(Row("catch-up", f"{mib}: same events as line by line "
                                        f"(first {verify_bytes >> 20} MiB)",
                            f"{'yes' if v.same else 'NO'}: {v.events} events, {v.lines} lines",
                            f"{v.simple_s:.1f} s line by line", f"{v.simple_s / v.fast_s:.0f}x",
                            "identical", v.same))
            if not v.same:
                note(v.first_difference)
    return rows
