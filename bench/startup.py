"""Benchmark 5: `hangwatch --help` starts fast (heavy modules are imported lazily), and a
command that loads the rules answers on a short log soon after (a start compiles only the
rule patterns its log needs)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from common import PYTHON, Row, Series, run_timed

GOAL_S = 0.25


def run(runs: int) -> list[Row]:
    python, hangwatch, check = Series(), Series(), Series()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "train.log"
        log.write_text("2026-01-11 00:00:01 [ROLLOUT] init_model START\n")
        commands = ([PYTHON, "-m", "hangwatch", "--help"],
                    [PYTHON, "-m", "hangwatch", "check", str(log)])
        for command in commands:  # warm the file cache, the .pyc files and the rule cache
            run_timed(command)
        for _ in range(runs):
            python.add(run_timed([PYTHON, "-c", "pass"]).wall)
            for command, series in zip(commands, (hangwatch, check), strict=True):
                result = run_timed(command)
                if result.rc != 0:
                    raise RuntimeError(f"{' '.join(command[2:4])} failed: {result.stderr}")
                series.add(result.wall)
    reference = f"python -c pass: {python.text(digits=3)}"
    return [Row("start-up", "hangwatch --help", hangwatch.text(digits=3), reference,
                f"{hangwatch.median / python.median:.1f}x", f"< {GOAL_S} s",
                hangwatch.median < GOAL_S),
            Row("start-up", "hangwatch check, a one-line log", check.text(digits=3), reference,
                f"{check.median / python.median:.1f}x")]
