"""Incident folders: what they hold, who may read them, and what never gets into them."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from hangwatch.collectors.gpu import NVML_MODULE_ENV
from hangwatch.collectors.snapshot import SnapshotOptions, take_snapshot
from hangwatch.core.events import Advice, SignalEvent, StallEvent
from hangwatch.reporters.incident import write_incident
from hangwatch.storage import files
from tests.fakes.jobs import Jobs

WALL = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC
GIB = 2**30
STACK = ('Python v3.11.7 (/usr/bin/python3.11)\n\nThread 42 (idle): "MainThread"\n'
         "    all_reduce (torch/distributed/distributed_c10d.py:3252)\n"
         "    sync_weights (trainer.py:88)")


def stall(phase="weight_sync", **kwargs):
    return StallEvent(phase=phase, phase_title="Weight sync" if phase else None,
                      last_completed="Rollout init", idle_s=723.0, threshold_s=600.0,
                      wall=WALL, **kwargs)


def snapshot():
    return {
        "taken_at": WALL + 1,
        "nvml": {"status": "ok", "detail": "", "elapsed_s": 1.1},
        "gpus": [{"index": 0, "name": "NVIDIA H100", "uuid": "GPU-1", "utilization": 100,
                  "utilization_samples": [100, 100], "memory_used": 70 * GIB,
                  "memory_total": 80 * GIB, "temperature": 70, "power_w": 650.0,
                  "processes": [{"pid": 42, "used_memory": 60 * GIB, "in_job": True}]}],
        "processes": [
            {"pid": 42, "found_by": "log-writer", "via": "has train.log open for writing",
             "name": "python3", "status": "sleeping", "cpu_percent": 0.5, "rss": 2 * GIB,
             "threads": 12, "cmdline": ["python3", "trainer.py"], "env": {"RANK": "0"},
             "gpus": [0], "stack": STACK},
            {"pid": 43, "found_by": "descendant", "via": "child of 42", "name": "tee",
             "status": "sleeping", "cmdline": ["tee", "x"], "stack": None,
             "stack_error": "not a Python process"},
        ],
        "system": {"shm": {"path": "/dev/shm", "total": 16 * GIB, "used": GIB,
                           "free": 15 * GIB, "used_percent": 6.2}},
        "discovery": {"log_paths": ["train.log"], "match": None, "notes": []},
        "errors": [],
    }


TIMELINE = [  # as the engine gives it (hangwatch/core/phases.py TimelineEntry.to_dict)
    {"phase": "rollout_init", "title": "Rollout init", "source": "/data/train.log", "line": 10,
     "started_wall": WALL - 900, "started_stamp": None, "state": "completed", "end_line": 11,
     "ended_wall": WALL - 780, "ended_stamp": None, "duration_s": 120.0},
    {"phase": "weight_sync", "title": "Weight sync", "source": "/data/train.log", "line": 12,
     "started_wall": WALL - 723, "started_stamp": None, "state": "running", "end_line": None,
     "ended_wall": None, "ended_stamp": None, "duration_s": None},
]
ADVICE = [Advice("Find the rank that never joined.",
                 "stack: pid 42 rank 0 (python3) in all_reduce (torch/distributed/"
                 "distributed_c10d.py:3252)")]


def write(tmp_path, **kwargs):
    params = {"stall": stall(), "timeline": TIMELINE, "log_tail": ["step 9\n", "[SYNC] start"],
              "sources": ["train.log"], "snapshot": snapshot(), "advice": ADVICE}
    return write_incident(tmp_path / "reports", **{**params, **kwargs})


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_incident_folder_holds_four_private_files(tmp_path):
    folder = write(tmp_path)
    assert folder == tmp_path / "reports" / "20260101T000000Z-weight_sync"
    assert sorted(p.name for p in folder.iterdir()) == [
        "log-tail.txt", "report.json", "report.md", "stacks.txt"]
    assert mode(folder) == 0o700 and mode(tmp_path / "reports") == 0o700
    assert all(mode(p) == 0o600 for p in folder.iterdir())


def test_report_json_has_the_agreed_shape(tmp_path):
    report = json.loads((write(tmp_path) / "report.json").read_text())
    assert set(report) >= {"stall", "timeline", "gpus", "processes", "system", "advice",
                           "sources", "discovery"}
    assert report["stall"]["phase"] == "weight_sync" and report["stall"]["idle_s"] == 723.0
    assert report["advice"] == [{"text": ADVICE[0].text, "because": ADVICE[0].because}]
    python, tee = report["processes"]
    assert python["stack"] == STACK and "stack_error" not in python
    assert tee["stack"] is None and tee["stack_error"] == "not a Python process"
    assert report["key_findings"][0] == (
        "pid 42 rank 0 (python3): all_reduce (torch/distributed/distributed_c10d.py:3252)")


def test_report_md_tells_the_story(tmp_path):
    md = (write(tmp_path) / "report.md").read_text()
    assert md.startswith("# Stall: Weight sync [weight_sync]\n")
    assert "- **No progress for:** 12m03s (threshold 10m00s, default)" in md
    assert "- **Last completed phase:** Rollout init" in md
    assert "| phase | state | started (UTC) | took | where |" in md
    assert ("| Rollout init (`rollout_init`) | completed | 2025-12-31 23:45:00Z | 2m00s | "
            "train.log:10 |") in md
    assert "| Weight sync (`weight_sync`) | running | 2025-12-31 23:47:57Z |  | train.log:12 |" \
        in md
    assert "- pid 42 rank 0 (python3): all_reduce (torch/distributed/" in md
    assert "### pid 42 rank 0 (python3)\n\n```text\n" + STACK + "\n```" in md
    assert "| 0 | NVIDIA H100 | 100 | 70.0/80.0 GiB | 70 | 650 W | 42\\* |" in md
    assert ("1. Find the rank that never joined.\n   - *because:* `stack: pid 42 rank 0 "
            "(python3) in all_reduce") in md
    assert "```text\nstep 9\n[SYNC] start\n```" in md
    stacks = (write(tmp_path) / "stacks.txt").read_text()
    assert stacks.startswith("== pid 42 rank 0 (python3): python3 trainer.py\nPython v3.11.7")
    assert "== pid 43 (tee): tee x\n(no stack: not a Python process)" in stacks


def test_a_long_timeline_shows_its_newest_rows(tmp_path):
    timeline = [{**TIMELINE[0], "line": n} for n in range(100)]
    md = (write(tmp_path, timeline=timeline) / "report.md").read_text()
    assert "train.log:99 |" in md and "train.log:70 |" in md and "train.log:69 |" not in md
    assert "(70 earlier entries in report.json)" in md


def test_without_a_snapshot_the_report_says_so(tmp_path):
    folder = write(tmp_path, snapshot=None, stall=stall(phase=None), advice=[])
    assert folder.name == "20260101T000000Z-unknown"
    report = json.loads((folder / "report.json").read_text())
    assert (report["gpus"], report["processes"], report["system"]) == ([], [], {})
    md = (folder / "report.md").read_text()
    assert md.startswith("# Stall: no phase in progress\n")
    assert "- (snapshots disabled)" in md and "## Processes" not in md


def test_collection_problems_are_listed_once(tmp_path):
    empty = {**snapshot(), "processes": [], "errors": [{"collector": "system",
                                                        "error": "timed out"}]}
    note = "no process of the job found: name it with --pid PID or --match REGEX"
    empty["discovery"] = {**empty["discovery"], "notes": [note]}
    md = (write(tmp_path, snapshot=empty) / "report.md").read_text()
    assert md.count(note) == 1
    assert "## Collection notes\n\n- system: timed out\n" in md


def test_two_stalls_in_the_same_second_get_their_own_folders(tmp_path):
    assert write(tmp_path).name == "20260101T000000Z-weight_sync"
    assert write(tmp_path).name == "20260101T000000Z-weight_sync-2"


def test_a_failed_write_leaves_no_partial_file(tmp_path, monkeypatch):
    calls = []
    real_fsync = os.fsync

    def failing_fsync(fd):
        calls.append(fd)
        if len(calls) == 2:  # report.md: the second file
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(files.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="No space left"):
        write(tmp_path)
    folder = tmp_path / "reports" / "20260101T000000Z-weight_sync"
    assert sorted(p.name for p in folder.iterdir()) == ["report.json"]  # complete, or absent
    json.loads((folder / "report.json").read_text())


def test_secrets_never_reach_the_report(tmp_path, monkeypatch):
    monkeypatch.setenv(NVML_MODULE_ENV, "hangwatch_no_such_nvml_module")
    jobs = Jobs(tmp_path)
    try:
        child = jobs.blocked_python(tmp_path / "train.log", args=["--hf-token", "hf_argv999"],
                                    env={"HF_TOKEN": "hf_secret123", "WANDB_API_KEY": "wb_k3y",
                                         "HF_ENDPOINT": "https://alice:pa55word@hub.example"})
        snap = take_snapshot(SnapshotOptions(pids=(child.pid,)))
    finally:
        jobs.close()
    signal = SignalEvent(id="auth", severity="error", source="train.log", line=3, wall=WALL,
                         text="401 for https://bob:s3cretpw@hub.example/api token=tok_abc777")
    folder = write(tmp_path, snapshot=snap, stall=stall(signals=(signal,)),
                   log_tail=["export HF_TOKEN=hf_secret123", "push https://bob:s3cretpw@x/"])
    assert snap["processes"][0]["env"]["HF_TOKEN"] == "<redacted>"
    for path in folder.iterdir():
        text = path.read_text()
        for secret in ("hf_secret123", "wb_k3y", "pa55word", "s3cretpw", "tok_abc777",
                       "hf_argv999"):
            assert secret not in text, f"{secret} leaked into {path.name}"
