"""Hostile input, measured: a catastrophic rule pattern against long lines, and `hangwatch
run` against a job that writes one 100 MB line or floods its output.

    python bench/hostile.py

Goals: a search stops at the per-search timeout (core/rules.py MATCH_TIMEOUT_S) whatever the
line; `run` stays under 100 MiB of RSS and its log keeps every byte.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil
import regex
from common import PYTHON, REPO, Row, render

from hangwatch.core import rules as rules_module
from hangwatch.core.clock import FakeClock
from hangwatch.core.engine import Engine
from hangwatch.core.prefilter import build_prefilter
from hangwatch.core.rules import RuleSet
from hangwatch.packs.load import load_builtin_packs, load_pack_text

CATASTROPHIC = r"(\w+\s?)+$"
PACK = f"pack: slow\nsignals:\n  - id: backtracks\n    match: '{CATASTROPHIC}'\n"
RSS_GOAL_MB = 100
JOBS = {
    "one 100 MB line, no newline": ("""
        import os
        chunk = b"x" * (1 << 20)
        for _ in range(100):
            os.write(1, chunk)
    """, 100 * (1 << 20) + 1),
    "flood: 1M lines as fast as written": ("""
        import sys
        line = "step %d loss 0.5 " + "z" * 80 + "\\n"
        for i in range(1_000_000):
            sys.stdout.write(line % i)
    """, None),
}


def regex_rows() -> list[Row]:
    """The catastrophic search alone (it must stop at the timeout), and what a whole line
    costs the engine with every built-in rule besides it, matched line by line or through
    the prefilter (which, where it can take the pattern whole, never backtracks)."""
    rows = []
    rules = RuleSet([*load_builtin_packs(), load_pack_text(PACK, "slow.yaml")])
    timeout = rules_module.MATCH_TIMEOUT_S
    pattern = regex.compile(CATASTROPHIC)
    for size in (10_000, 100_000, 1_000_000):
        text = "word " * (size // 5) + "!"
        started = time.perf_counter()
        try:
            pattern.search(text, timeout=timeout)
            cut = "finished"
        except TimeoutError:
            cut = "cut"
        took = (time.perf_counter() - started) * 1000
        rows.append(Row("catastrophic regex", f"one search, {size // 1000} kB line",
                        f"{took:.0f} ms ({cut})", goal=f"< {timeout * 2000:.0f} ms",
                        ok=took < timeout * 2000))
        for prefiltered in (False, True):
            prefilter = build_prefilter(rules) if prefiltered else None
            engine = Engine(rules, default_stall=60, clock=FakeClock(), prefilter=prefilter)
            started = time.perf_counter()
            engine.feed_block("job.log", (text + "\n").encode() * 5)
            per_line = (time.perf_counter() - started) / 5 * 1000
            path = "prefilter" if prefilter is not None else "line by line"
            rows.append(Row("catastrophic regex", f"engine, {path}, {size // 1000} kB line",
                            f"{per_line:.1f} ms/line"))
    return rows


def run_sampled(argv: list[str]) -> tuple[int, float, float]:
    """Exit status, wall seconds and hangwatch's own peak RSS (MiB), sampled every 5 ms: the
    job's output goes to /dev/null, not into this process (a child's rusage would count the
    pages it shares with a big parent)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env)
    watched, peak = psutil.Process(proc.pid), 0
    while proc.poll() is None:
        with contextlib.suppress(psutil.Error):
            peak = max(peak, watched.memory_info().rss)
        time.sleep(0.005)
    return proc.wait(), time.perf_counter() - started, peak / (1 << 20)


def run_rows() -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (script, size) in JOBS.items():
            job = Path(tmp, "job.py")
            job.write_text(textwrap.dedent(script))
            log = Path(tmp, "job.log")
            rc, wall, peak_mb = run_sampled([PYTHON, "-m", "hangwatch", "run", "--log",
                                             str(log), "--no-snapshot", "--stall", "60s",
                                             "--report-dir", str(Path(tmp, "r")), "--", PYTHON,
                                             str(job)])
            whole = log.stat().st_size == size if size else rc == 0
            rows.append(Row("run output", f"{name}: peak RSS", f"{peak_mb:.0f} MiB",
                            goal=f"< {RSS_GOAL_MB} MiB", ok=peak_mb < RSS_GOAL_MB))
            rows.append(Row("run output", f"{name}: wall, log whole",
                            f"{wall:.2f} s, {'yes' if whole else 'NO'}", ok=whole))
    return rows


def main() -> int:
    rows = run_rows() + regex_rows()
    print(render(rows))
    return 0 if all(r.ok is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
