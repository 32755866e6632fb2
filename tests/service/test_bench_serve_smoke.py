"""bench/serve.py runs end to end at tiny sizes; only its no-re-read check can fail here (a
shared CI machine says nothing about CPU shares)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(120)
def test_bench_serve_smoke_restarts_without_reading_the_log_again(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "bench/serve.py", "--smoke"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "restart: bytes read by the restarted process (no re-read)" in done.stdout
    assert list(tmp_path.iterdir()) == []  # generated logs removed
