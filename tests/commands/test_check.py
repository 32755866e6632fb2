from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

from hangwatch.cli import main


def check(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", *args], out, err)
    return status, out.getvalue() + err.getvalue()


def write_log(path: Path, lines: list[str], age_s: float = 0) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines))
    if age_s:
        then = time.time() - age_s
        os.utime(path, (then, then))
    return path


GKD = ["2026-01-11 10:00:00,000 Generating train split: 0 examples",
       "2026-01-11 10:02:00,000 [ACTOR] init_model START",
       "2026-01-11 10:07:30,000 [ACTOR] init_model DONE",
       "2026-01-11 10:07:31,000 [ROLLOUT] init_model START",
       "2026-01-11 10:09:31,000 [ROLLOUT] init_model DONE",
       "2026-01-11 10:09:32,000 [SYNC] Starting weight synchronization"]


def test_quiet_log_is_stalled_with_phase_timeline_and_advice(tmp_path: Path):
    status, text = check(str(write_log(tmp_path / "a.log", GKD, age_s=3600)), "--json")
    assert status == 3
    data = json.loads(text)
    assert data["verdict"] == "stalled"
    assert (data["phase"], data["last_completed"]) == ("weight_sync", "rollout_init")
    durations = {e["phase"]: e["duration_s"] for e in data["timeline"]}
    assert durations["actor_init"] == 330.0  # from the timestamps printed on the lines
    assert durations["rollout_init"] == 120.0
    assert data["advice"] and all(a["because"] for a in data["advice"])


def test_recent_log_is_running(tmp_path: Path):
    status, text = check(str(write_log(tmp_path / "a.log", GKD)), "--json")
    assert status == 0 and json.loads(text)["verdict"] == "running"


def test_finish_line_last_means_finished_even_when_old(tmp_path: Path):
    log = write_log(tmp_path / "a.log", [*GKD, "[SYNC] weights done", "Training finished",
                                         "ray shutdown"], age_s=7200)
    status, text = check(str(log), "--json")
    assert status == 0 and json.loads(text)["verdict"] == "finished"


def test_collective_timeout_signal_means_stalled_even_when_recent(tmp_path: Path):
    log = write_log(tmp_path / "a.log", [
        *GKD, "[rank1]:[E111 10:20:00] Watchdog caught collective operation timeout: "
              "WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for 600000 milliseconds"])
    status, text = check(str(log), "--json")
    data = json.loads(text)
    assert status == 3 and data["verdict"] == "stalled"
    assert [s["id"] for s in data["signals"] if s["severity"] == "error"]


def test_human_output_names_verdict_phase_and_advice(tmp_path: Path):
    status, text = check(str(write_log(tmp_path / "a.log", GKD, age_s=3600)))
    assert status == 3
    assert "verdict:        STALLED" in text
    assert "phase open:     Weight sync (NCCL) [weight_sync]" in text
    assert "last completed: rollout_init" in text
    assert "advice:" in text and "because phase weight_sync" in text


def test_missing_log_is_a_usage_error(tmp_path: Path):
    status, text = check(str(tmp_path / "nope.log"))
    assert status == 2 and "no such log file" in text


def test_a_given_stall_outranks_a_phase_stall_after_and_check_says_so(tmp_path: Path):
    log = write_log(tmp_path / "a.log", ["Generating train split: 0 examples [00:00, ?]"],
                    age_s=300)
    status, text = check(str(log), "--json")
    data = json.loads(text)
    assert (status, data["threshold_s"], data["threshold_from"]) == (
        0, 1200.0, "stall_after of data_load in hf-datasets")
    status, text = check(str(log), "--json", "--stall", "3m")
    data = json.loads(text)
    assert (status, data["threshold_s"], data["threshold_from"]) == (3, 180.0, "--stall")
    status, text = check(str(log), "--phase-stall", "data_load=2m")
    assert status == 3 and "threshold 2m00s, --phase-stall data_load" in text


def test_phase_stall_naming_no_phase_is_a_usage_error(tmp_path: Path):
    log = write_log(tmp_path / "a.log", ["x"])
    status, text = check(str(log), "--phase-stall", "no_such_phase=2m")
    assert status == 2 and "no phase or step named no_such_phase" in text
    assert check(str(log), "--phase-stall", "2m")[0] == 2  # argparse: not PHASE=DURATION


def test_check_names_the_step_in_progress_and_the_line_that_chose_it(tmp_path: Path):
    lines = [*GKD, "2026-01-11 10:09:32,500 [SYNC] Syncing actor weights...",
             "2026-01-11 10:09:33,000 [SYNC] ✓ Actor sync done in 0.3s",
             "2026-01-11 10:09:33,100 [SYNC] Waiting for rollout weights (timeout=30s)..."]
    status, text = check(str(write_log(tmp_path / "a.log", lines, age_s=3600)))
    assert status == 3
    assert ("phase open:     Weight sync (NCCL) [weight_sync], step: Waiting for rollout "
            "weights [sync_rollout_weights], after step sync_actor_weights") in text
    assert "last completed: rollout_init" in text
    assert "named by:       " in text and "Waiting for rollout weights (timeout=30s)" in text


def test_nothing_open_names_the_place_expected_next_in_text_and_json(tmp_path: Path):
    log = write_log(tmp_path / "ray.log", [
        'python -c "import ray; ray.init()"',
        "2025-08-01 19:29:12,771\tINFO worker.py:1843 -- Started a local Ray instance. View "
        "the dashboard at http://127.0.0.1:8265"], age_s=3600)
    data = json.loads(check(str(log), "--json")[1])
    assert (data["phase"], data["last_completed"]) == (None, "ray_init")
    assert data["between"] == ("after Ray init (ray_init), before Ray workers starting "
                               "(ray_worker_startup), by the order of pack ray")
    assert "between:        after Ray init (ray_init)" in check(str(log))[1]


def test_a_timeout_after_a_bar_takes_the_bars_loop_as_its_place(tmp_path: Path):
    log = write_log(tmp_path / "t.log", [
        "Sampling: 45%|####5     | 9/20 [01:23<01:40]",
        "[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=7, OpType=ALLREDUCE) ran for 600004 milliseconds before timing out."])
    status, text = check(str(log), "--json")
    data = json.loads(text)
    assert status == 3
    assert data["phase"] == "generic:evaluation"
    assert data["context"].startswith("named by the line before the stop: ")
    assert "context:        named by the line before the stop" in check(str(log))[1]


def test_nothing_named_shows_the_last_line_and_a_bar_at_the_end_names_its_place(tmp_path: Path):
    quiet = write_log(tmp_path / "q.log", ["config saved", "Using a generated random seed 4"],
                      age_s=3600)
    status, text = check(str(quiet))
    assert status == 3
    assert f"last line:      {quiet}:2: Using a generated random seed 4" in text
    data = json.loads(check(str(quiet), "--json")[1])
    assert data["last_line"] == {"source": str(quiet), "line": 2,
                                 "text": "Using a generated random seed 4"}
    assert data["place"] is None
    bar = write_log(tmp_path / "b.log", ["model ready", "Scoring test set: 45%|####5 | 9/20"],
                    age_s=3600)
    data = json.loads(check(str(bar), "--json")[1])
    assert (data["phase"], data["place"]) == (None, "generic:evaluation")
    assert "place:          Evaluation or validation [generic:evaluation], by the last lines" \
        in check(str(bar))[1]
    opened = write_log(tmp_path / "o.log", ["Loading checkpoint shards: 50%"], age_s=3600)
    assert "last line:" not in check(str(opened))[1]


def test_a_log_of_thousands_of_processes_names_no_laggards_and_says_why_once(tmp_path: Path):
    """Workers restarted all the time: 3,000 pids, each for 20 lines, in a real file."""
    lines = []
    for i in range(60_000):
        pid = 10_000 + i // 20
        lines.append(f"(TaskRunner pid={pid}) step:{i // 10} - loss 0.5" if i % 10 == 0
                     else f"(WorkerDict pid={pid}) Processing batch {i}")
    log = write_log(tmp_path / "ray.log", lines, age_s=3600)
    status, text = check(str(log))
    assert status == 3
    ranks = text.split("\nranks:\n", 1)[1]
    assert ranks.count("not judged: ray.log names more than 256 processes") == 1
    assert "laggard" not in ranks
    status, text = check(str(log), "--json")
    data = json.loads(text)
    assert (data["laggards"], data["laggards_more"], data["ranks"]) == ([], 0, [])
    assert data["rank_summary"].startswith("not judged: ray.log names more than 256")
