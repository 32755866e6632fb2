"""Soak: a real `hangwatch serve` with 8 watches whose logs are written at ~600 lines/s and
rotated every 40 s counts every line once, stays quiet, and holds memory, fds and threads
flat (bench/soak.py). 45 s here (one rotation of each log); HANGWATCH_SOAK_SECONDS=3600 runs
it for an hour."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECONDS = float(os.environ.get("HANGWATCH_SOAK_SECONDS", "45"))
sys.path.insert(0, str(ROOT / "bench"))

from soak import Result, Sample  # noqa: E402


@pytest.mark.timeout(SECONDS + 180)
def test_serve_under_load_counts_every_line_and_stays_flat(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "bench/soak.py", "--seconds", str(SECONDS),
                           "--warmup", str(min(60.0, SECONDS / 3))], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=SECONDS + 170)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("\n  ok"), done.stdout
    assert "stall/blind events: 0" in done.stdout
    assert list(tmp_path.iterdir()) == []  # its folder is removed


def judged(samples: list[Sample], counted: int = 100) -> list[str]:
    result = Result(10.0, {"job0": 100}, {"job0": counted}, [], samples, 2.0, 1)
    result.judge()
    return result.problems


def flat(at: float, rss: float = 50.0, fds: int = 17, threads: int = 23) -> Sample:
    return Sample(at, rss, fds, threads)


def test_soak_verdict_passes_flat_figures_and_a_rotation_in_flight():
    assert judged([flat(t) for t in range(2, 10)] + [flat(9, fds=25), flat(10)]) == []


@pytest.mark.parametrize(("samples", "counted", "problem"), [
    ([flat(t) for t in range(2, 11)], 99, "lines counted differ from lines written: "
                                          "{'job0': -1}"),
    ([flat(t) for t in range(2, 10)] + [flat(10, rss=61.0)], 100, "RSS grew 11.0 MB"),
    ([flat(t, fds=17 + t) for t in range(2, 11)], 100, "fds climbed"),
    ([flat(t) for t in range(2, 10)] + [flat(10, threads=24)], 100, "threads climbed"),
])
def test_soak_verdict_fails_a_lost_line_and_growth(samples, counted, problem):
    assert any(p.startswith(problem) for p in judged(samples, counted))
