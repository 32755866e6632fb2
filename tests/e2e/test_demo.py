"""`hangwatch demo`, the quick start: a real job that hangs in weight sync, caught live."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_demo_catches_the_hang_in_the_weight_sync_step_and_exits_0(tmp_path: Path):
    result = subprocess.run(
        [sys.executable, "-m", "hangwatch", "demo", "--plain", "--stall", "2s",
         "--report-dir", str(tmp_path / "reports")],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert ("phase in progress: Weight sync (NCCL) [weight_sync], step: Waiting for rollout "
            "weights [sync_rollout_weights]") in out
    assert "last completed:    rollout_init" in out
    assert "wait_for_rollout_weights (hangwatch/jobs/demo_job.py" in out  # the blocked frame
    [report] = (tmp_path / "reports").iterdir()
    assert (report / "report.md").is_file()
