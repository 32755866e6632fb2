"""`hangwatch LOG --json` on a log with a long history: its phase events come as one
`caught_up` summary (unless `--replay`), and that summary is exactly the fold of the events
`--replay` writes one by one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from hangwatch.core.catchup import CatchUpSummary
from hangwatch.core.events import PhaseEvent

ROOT = Path(__file__).resolve().parents[2]
STEP = [
    "[ROLLOUT] generate_sequences START",
    "INFO Avg prompt throughput: 10.0 tokens/s, Running: 3 reqs",
    "[ROLLOUT] generate_sequences DONE",
    "[SYNC] Starting weight synchronization",
    "[SYNC] Syncing actor weights",
    "[SYNC] Actor sync done",
    "[SYNC] Waiting for rollout weights",
    "[SYNC] Rollout weights received",
    "[SYNC] weight sync done in 2.31s",
    "[ACTOR] update_actor START",
    "[ACTOR] update_actor DONE",
]


def old_log(tmp_path: Path, steps: int) -> Path:
    log = tmp_path / "train.log"
    lines = ["[ACTOR] init_model START", "[ACTOR] init_model DONE"]
    for n in range(1, steps + 1):
        lines += [*STEP, f"step:{n} - actor/pg_loss:0.1"]
    lines += STEP[:7]  # the last step hangs waiting for the rollout weights
    log.write_text("\n".join(lines) + "\n")
    then = time.time() - 3600
    os.utime(log, (then, then))
    return log


def watch_json(log: Path, tmp_path: Path, *extra: str) -> list[dict]:
    done = subprocess.run(
        [sys.executable, "-m", "hangwatch", str(log), "--json", "--exit-on-stall",
         "--no-snapshot", "--report-dir", str(tmp_path / "r"), *extra],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 3, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_history_comes_as_one_caught_up_event_equal_to_the_replayed_events(tmp_path):
    log = old_log(tmp_path, steps=40)
    summed = watch_json(log, tmp_path)
    replayed = watch_json(log, tmp_path, "--replay")

    assert [e["event"] for e in summed] == ["caught_up", "stall"]
    phase_events = [e for e in replayed if e["event"] == "phase"]
    assert len(phase_events) > 40 * 10
    [summary] = [e for e in summed if e["event"] == "caught_up"]
    assert summary["phase_events"] == len(phase_events)
    spans = {(p["phase"], p["parent"]): p for p in summary["phases"]}
    for key in {(e["phase"], e["parent"]) for e in phase_events}:
        mine = [e for e in phase_events if (e["phase"], e["parent"]) == key]
        span = spans.pop(key)
        assert span["started"] == sum(e["state"] == "started" for e in mine)
        assert span["completed"] == sum(e["state"] == "completed" for e in mine)
        assert (span["first_line"], span["last_line"]) == (mine[0]["line"], mine[-1]["line"])
    assert spans == {}  # no phase in the summary that no event came from
    assert summary["lines"] == len(log.read_text().splitlines())
    stall = summed[-1]
    assert (stall["phase"], stall["step"]) == ("weight_sync", "sync_rollout_weights")
    assert [e["event"] for e in replayed][-1] == "stall"


def test_summary_counts_each_phase_and_step_apart_in_first_seen_order():
    summary = CatchUpSummary()
    events = [("weight_sync", None, "started", 3), ("sync_actor_weights", "weight_sync",
              "started", 4), ("sync_actor_weights", "weight_sync", "completed", 5),
              ("weight_sync", None, "completed", 9), ("weight_sync", None, "started", 12)]
    for phase, parent, state, line in events:
        summary.add(PhaseEvent(phase, phase.title(), state, "a.log", line, float(line),
                               parent=parent))
    done = summary.event(lines=20, wall=30.0)
    assert done.events == 5 and done.lines == 20
    sync, actor = done.phases
    assert (sync.phase, sync.started, sync.completed) == ("weight_sync", 2, 1)
    assert (sync.first_line, sync.last_line, sync.first_time, sync.last_time) == (3, 12, 3, 12)
    assert (actor.parent, actor.started, actor.completed) == ("weight_sync", 1, 1)
