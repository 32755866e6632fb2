"""The benchmark runs end to end at tiny sizes. It asserts no timing (a shared CI machine
says nothing about speed), only that every benchmark ran and its correctness checks held:
the prefilter changed no event, the follower lost no line, the snapshot found the tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("hyperscan")


@pytest.mark.timeout(240)
def test_bench_smoke_runs_every_benchmark_and_keeps_events_identical(tmp_path):
    rows_file = tmp_path / "rows.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "bench/run.py", "--smoke", "--json", str(rows_file)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=230)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads(rows_file.read_text())
    assert {r["bench"] for r in rows} == {"catch-up", "memory", "follow", "quiet", "start-up",
                                          "snapshot", "rules test", "per-step"}
    same = [r for r in rows if "same events" in r["measure"]]
    assert len(same) == 3  # one a log: NCCL INFO, rollout-heavy, progress-heavy
    assert all(r["ok"] and r["value"].startswith("yes") for r in same)
    assert "| catch-up" in done.stdout  # the table is printed
    assert [p.name for p in tmp_path.iterdir()] == ["rows.json"]  # generated logs removed
