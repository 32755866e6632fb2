"""Benchmark 5: `hangwatch --help` starts fast (heavy modules are imported lazily)."""

from __future__ import annotations

from common import PYTHON, Row, Series, run_timed

GOAL_S = 0.25


def run(runs: int) -> list[Row]:
    python, hangwatch = Series(), Series()
    run_timed([PYTHON, "-m", "hangwatch", "--help"])  # warm the file cache and .pyc files
    for _ in range(runs):
        python.add(run_timed([PYTHON, "-c", "pass"]).wall)
        result = run_timed([PYTHON, "-m", "hangwatch", "--help"])
        if result.rc != 0:
            raise RuntimeError(f"hangwatch --help failed: {result.stderr}")
        hangwatch.add(result.wall)
    return [Row("start-up", "hangwatch --help", hangwatch.text(digits=3),
                f"python -c pass: {python.text(digits=3)}",
                f"{hangwatch.median / python.median:.1f}x", f"< {GOAL_S} s",
                hangwatch.median < GOAL_S)]
