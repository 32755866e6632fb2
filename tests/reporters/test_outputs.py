from __future__ import annotations

import io
import json

from rich.console import Console

from hangwatch.core.events import Advice, Incident, Notice, PhaseEvent, SignalEvent, StallEvent
from hangwatch.reporters.console import ConsoleReporter
from hangwatch.reporters.jsonl import JsonReporter
from hangwatch.reporters.plain import PlainReporter

STALL = StallEvent(phase="weight_sync", phase_title="Weight sync (NCCL)",
                   last_completed="rollout_init", idle_s=301.5, threshold_s=300.0, wall=0.0)
ADVICE = (Advice("raise NCCL_TIMEOUT", "phase weight_sync in progress"),
          Advice("fewer rollout GPUs", "phase weight_sync in progress"),
          Advice("a rank died", "process_status=zombie (pid 7)"))
INCIDENT = Incident(STALL, "/reports/x", ADVICE, ("pid 7 (python): all_reduce (train.py:3)",))


def test_json_lines_carry_the_documented_keys():
    out = io.StringIO()
    reporter = JsonReporter(out)
    reporter.event(PhaseEvent("weight_sync", "Weight sync", "started", "t.log", 6, 1.0))
    reporter.event(SignalEvent("nccl_timeout", "error", "t.log", 7, "Watchdog...", 2.0))
    reporter.event(STALL)  # written with its incident, not before
    reporter.incident(INCIDENT)
    reporter.notice(Notice("t.log", "truncated", "t.log: file truncated"))
    phase, signal, stall, notice = (json.loads(x) for x in out.getvalue().splitlines())
    assert phase == {"event": "phase", "phase": "weight_sync", "title": "Weight sync",
                     "state": "started", "parent": None, "source": "t.log", "line": 6,
                     "time": 1.0}
    assert (signal["event"], signal["id"], signal["severity"], signal["line"]) == (
        "signal", "nccl_timeout", "error", 7)
    assert stall["event"] == "stall" and stall["phase"] == "weight_sync"
    assert stall["last_completed"] == "rollout_init" and stall["idle_s"] == 301.5
    assert stall["report"] == "/reports/x"
    assert (stall["between"], stall["context"]) == (STALL.between, STALL.context)
    assert stall["advice"] == ["raise NCCL_TIMEOUT", "fewer rollout GPUs", "a rank died"]
    assert stall["evidence"] == ["phase weight_sync in progress", "process_status=zombie (pid 7)"]
    assert notice == {"event": "notice", "kind": "truncated", "path": "t.log",
                      "message": "t.log: file truncated"}


def test_plain_incident_says_each_reason_once_after_its_advice():
    out = io.StringIO()
    PlainReporter(out, now=lambda: 0.0).incident(INCIDENT)
    text = out.getvalue()
    assert text.count("because: phase weight_sync in progress") == 1
    assert "phase in progress: Weight sync (NCCL) [weight_sync]" in text
    assert "last completed:    rollout_init" in text
    assert "finding: pid 7 (python): all_reduce (train.py:3)" in text
    lines = [line.split(" ", 1)[1] for line in text.splitlines()]
    assert lines.index("  advice: fewer rollout GPUs") < lines.index(
        "          because: phase weight_sync in progress")


def test_console_shows_stall_panel_with_phase_findings_and_advice():
    buffer = io.StringIO()
    console = Console(file=buffer, width=120, force_terminal=False)
    reporter = ConsoleReporter(buffer, now=lambda: 0.0, console=console)
    reporter.incident(INCIDENT)
    reporter.close()
    text = buffer.getvalue()
    for expected in ("STALL", "Weight sync (NCCL) [weight_sync]", "rollout_init",
                     "5m01s (threshold 5m00s, default)", "/reports/x", "all_reduce (train.py:3)",
                     "1. raise NCCL_TIMEOUT", "because process_status=zombie (pid 7)"):
        assert expected in text


WHY = "rank 2 is in `load_batch` (data loading) while ranks 0,1 wait in `all_reduce` \x1b[31m"
GROUPED = Incident(
    STALL, "/reports/x", ADVICE, (WHY, "GPU0 idle"),
    stack_groups=({"where": "all_reduce (torch/distributed/distributed_c10d.py)", "frames": [],
                   "pids": [10, 11], "ranks": [0, 1], "count": 2, "phase": "collective"},
                  {"where": "load_batch (train.py)", "frames": [], "pids": [12], "ranks": [2],
                   "count": 1, "phase": "data_load"}),
    suspects=({"pid": 12, "rank": 2, "where": "load_batch (train.py)", "phase": "data_load",
               "why": WHY},), stack_summary=WHY, frames_phase="collective")


def test_the_stall_event_carries_the_groups_suspects_and_the_frames_phase():
    out = io.StringIO()
    JsonReporter(out).incident(GROUPED)
    stall = json.loads(out.getvalue())
    assert [g["ranks"] for g in stall["stack_groups"]] == [[0, 1], [2]]
    assert stall["suspects"][0]["rank"] == 2 and stall["suspects"][0]["phase"] == "data_load"
    assert (stall["phase"], stall["frames_phase"]) == ("weight_sync", "collective")


def test_plain_and_console_name_the_suspect_once_escaped():
    out = io.StringIO()
    PlainReporter(out, now=lambda: 0.0).incident(GROUPED)
    text = out.getvalue()
    assert "\x1b" not in text
    assert "suspect:           rank 2 is in `load_batch`" in text
    assert "the frames say:   collective (the log says weight_sync)" in text
    assert text.count("rank 2 is in") == 1  # not again among the findings
    buffer = io.StringIO()
    console = Console(file=buffer, width=80, height=24, force_terminal=False)
    reporter = ConsoleReporter(buffer, now=lambda: 0.0, console=console)
    reporter.incident(GROUPED)
    reporter.close()
    shown = buffer.getvalue()
    assert "\x1b" not in shown
    assert "suspect" in shown and "rank 2 is in `load_batch`" in shown
