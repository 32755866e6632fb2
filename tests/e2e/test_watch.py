"""`hangwatch LOG` against a real job process that writes GKD markers and then blocks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

JOB = textwrap.dedent("""
    import os, sys, time
    log = sys.argv[1]
    def say(text):
        with open(log, "a") as fh:
            fh.write(text + "\\n")
    for line in ["Generating train split: 0 examples", "[ACTOR] init_model START",
                 "[ACTOR] init_model DONE", "[ROLLOUT] init_model START",
                 "[ROLLOUT] init_model DONE", "[SYNC] Starting weight synchronization"]:
        say(line)
        time.sleep(0.1)
    def wait_for_rollout_weights():
        r, w = os.pipe()
        os.read(r, 1)
    wait_for_rollout_weights()
""")


def hangwatch(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hangwatch", *args], capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def blocked_job(tmp_path: Path):
    script = tmp_path / "job.py"
    script.write_text(JOB)
    log = tmp_path / "train.log"
    job = subprocess.Popen([sys.executable, str(script), str(log)])
    yield log, job
    job.kill()
    job.wait()


def test_blocked_job_stalls_in_weight_sync_within_seconds(blocked_job, tmp_path: Path):
    log, job = blocked_job
    started = time.monotonic()
    result = hangwatch(str(log), "--stall", "2s", "--exit-on-stall", "--json",
                       "--report-dir", str(tmp_path / "reports"), "--pid", str(job.pid),
                       "--no-stacks")
    elapsed = time.monotonic() - started
    assert result.returncode == 3, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    [stall] = [e for e in events if e["event"] == "stall"]
    assert stall["phase"] == "weight_sync"
    assert stall["last_completed"] == "rollout_init"
    assert stall["idle_s"] >= 2
    assert any("NCCL" in a for a in stall["advice"])
    assert elapsed < 25
    report = json.loads((Path(stall["report"]) / "report.json").read_text())
    assert report["stall"]["phase"] == "weight_sync"
    tail = (Path(stall["report"]) / "log-tail.txt").read_text()
    assert "[SYNC] Starting weight synchronization" in tail
    # Lines written before the watcher caught up are summed up in `caught_up`; later ones
    # come as phase events: which is which depends on how fast the job started.
    phases = [(e["phase"], e["state"]) for e in events if e["event"] == "phase"]
    [summary] = [e for e in events if e["event"] == "caught_up"]
    phases += [(p["phase"], state) for p in summary["phases"]
               for state in ("started", "completed") if p[state]]
    assert ("rollout_init", "completed") in phases and ("weight_sync", "started") in phases


def test_log_that_does_not_exist_yet_is_waited_for(tmp_path: Path):
    log = tmp_path / "later.log"
    watcher = subprocess.Popen(
        [sys.executable, "-m", "hangwatch", str(log), "--stall", "2s", "--exit-on-stall",
         "--json", "--no-snapshot", "--report-dir", str(tmp_path / "r")],
        stdout=subprocess.PIPE, text=True)
    assert watcher.stdout is not None
    lines: list[str] = []
    try:
        # The file is made once the watcher has said it waits for it (a loaded machine may
        # take seconds to start it), never before.
        for line in watcher.stdout:
            lines.append(line)
            if '"kind": "waiting"' in line or '"kind":"waiting"' in line:
                break
        log.write_text("[SYNC] Starting weight synchronization\n")
        out, _ = watcher.communicate(timeout=30)
    finally:
        watcher.kill()
    events = [json.loads(line) for line in [*lines, *out.splitlines()]]
    kinds = [e.get("kind") for e in events if e["event"] == "notice"]
    assert "waiting" in kinds and "appeared" in kinds
    assert watcher.returncode == 3
    assert [e["phase"] for e in events if e["event"] == "stall"] == ["weight_sync"]


def test_log_already_quiet_longer_than_threshold_stalls_at_once(tmp_path: Path):
    log = tmp_path / "old.log"
    log.write_text("[ACTOR] init_model START\n")
    old = time.time() - 3600
    os.utime(log, (old, old))
    started = time.monotonic()
    result = hangwatch(str(log), "--stall", "10m", "--exit-on-stall", "--json",
                       "--no-snapshot", "--report-dir", str(tmp_path / "r"))
    assert result.returncode == 3
    [stall] = [json.loads(x) for x in result.stdout.splitlines() if '"stall"' in x]
    assert stall["phase"] == "actor_init" and stall["idle_s"] >= 3599
    assert time.monotonic() - started < 15


def test_plain_output_when_not_a_terminal(blocked_job, tmp_path: Path):
    log, _job = blocked_job
    result = hangwatch(str(log), "--stall", "2s", "--exit-on-stall", "--no-snapshot",
                       "--report-dir", str(tmp_path / "r"))
    assert result.returncode == 3
    assert "phase weight_sync (Weight sync (NCCL)) started" in result.stdout
    assert "STALL: no progress for" in result.stdout
    assert "phase in progress: Weight sync (NCCL) [weight_sync]" in result.stdout
    assert "hangwatch: stall threshold 2s (--stall)" in result.stdout
    assert "last completed:    rollout_init" in result.stdout


BAR_JOB = textwrap.dedent("""
    import os, sys, time
    with open(sys.argv[1], "a") as fh:
        fh.write("loading the job\\n")
        fh.write("\\rGenerating train split: 0 examples [00:00, ? examples/s]")
        fh.flush()
        r, w = os.pipe()
        os.read(r, 1)  # the dataset build never moves: the bar is never drawn again
""")


def test_a_job_stuck_under_an_unfinished_progress_bar_is_placed_in_its_phase(tmp_path: Path):
    script = tmp_path / "job.py"
    script.write_text(BAR_JOB)
    log = tmp_path / "train.log"
    job = subprocess.Popen([sys.executable, str(script), str(log)])
    try:
        result = hangwatch(str(log), "--stall", "2s", "--exit-on-stall", "--json",
                           "--no-snapshot", "--report-dir", str(tmp_path / "reports"))
    finally:
        job.kill()
        job.wait()
    assert result.returncode == 3, result.stderr
    [stall] = [e for e in map(json.loads, result.stdout.splitlines()) if e["event"] == "stall"]
    assert stall["phase"] == "data_load"
    assert stall["marker"].endswith("Generating train split: 0 examples [00:00, ? examples/s]")


def test_a_watch_started_with_sigint_ignored_still_ends_cleanly_on_sigint(tmp_path: Path):
    # A script's background job (`hangwatch watch train.log &`) and some CI runners start
    # their children with SIGINT ignored; `kill -INT` must still end the watch as Ctrl-C
    # does (exit 0, its session closed), not leave it to a SIGTERM.
    from tests.fakes.hangwatch_proc import Hangwatch

    log = tmp_path / "train.log"
    log.write_text("[SYNC] Starting weight synchronization\n")
    hw = Hangwatch("watch", str(log), "--json", "--no-snapshot",
                   "--report-dir", str(tmp_path / "reports"),
                   "--state-dir", str(tmp_path / "state"), sigint_ignored=True)
    try:
        assert hw.lines.get(timeout=15)  # it is reading the log
    finally:
        assert hw.stop() == 0, hw.output()  # SIGINT
