"""Advice is ranked by how specific its evidence is; people see three and where the rest are."""

from __future__ import annotations

import io
import json

from rich.console import Console

from hangwatch.core.events import (
    Advice,
    Incident,
    Laggard,
    RecoveredEvent,
    SignalEvent,
    StallEvent,
)
from hangwatch.escape.jsontext import dumps
from hangwatch.reporters.advice import rank_advice
from hangwatch.reporters.console import ConsoleReporter
from hangwatch.reporters.jsonl import incident_dict
from hangwatch.reporters.plain import describe_incident

PHASE = Advice("phase advice", "phase weight_sync in progress since t.log:3")
WARNING = SignalEvent("slow", "warning", "t.log", 4, "slow", 0.0, (Advice("warn advice", "w"),))
ERROR = SignalEvent("nccl", "error", "t.log", 5, "timeout", 0.0, (Advice("error advice", "e"),))
STALL = StallEvent("weight_sync", "Weight sync", "rollout", 70.0, 60.0, 0.0,
                   advice=(PHASE, *WARNING.advice, *ERROR.advice), signals=(WARNING, ERROR))
ONE_CONDITION = Advice("gpu advice", "gpus=busy (GPU0 100%)")
TWO_CONDITIONS = Advice("stack advice", "gpus=busy (GPU0 100%); stack: pid 7 in all_reduce")


def test_most_specific_evidence_first():
    ranked = rank_advice(STALL, [ONE_CONDITION, TWO_CONDITIONS])
    assert [a.text for a in ranked] == ["stack advice", "gpu advice", "error advice",
                                        "warn advice", "phase advice"]


def test_repeated_advice_is_given_once():
    ranked = rank_advice(STALL, [Advice("phase advice", "gpus=busy")])
    assert [a.text for a in ranked].count("phase advice") == 1


def test_people_see_three_and_are_told_where_the_rest_are():
    advice = tuple(rank_advice(STALL, [ONE_CONDITION, TWO_CONDITIONS]))
    lines = describe_incident(Incident(STALL, "/reports/x", advice))
    assert sum("advice:" in line for line in lines) == 3
    assert "  (2 more in report.md)" in lines
    assert incident_dict(Incident(STALL, "/reports/x", advice))["advice"] == [
        a.text for a in advice]  # machines get all
    # Without a report there is nowhere else to read them: all are shown.
    assert sum("advice:" in line for line in describe_incident(
        Incident(STALL, None, advice))) == 5


def test_step_and_laggards_are_shown_when_the_stall_has_them():
    stall = StallEvent("weight_sync", "Weight sync", "rollout", 70.0, 60.0, 0.0,
                       step="sync_rollout_weights", step_title="Waiting for rollout weights",
                       laggards=(Laggard("logs/rank3.log", 3, "train_loop", 40.0, 117,
                                         "at step 117 while ranks 0,1,2 reached step 118"),))
    incident = Incident(stall, "/reports/x", ())
    text = "\n".join(describe_incident(incident))
    assert ("phase in progress: Weight sync [weight_sync], step: Waiting for rollout weights "
            "[sync_rollout_weights]") in text
    assert ("laggard: rank 3 (rank3.log): at step 117 while ranks 0,1,2 reached step 118"
            in text)
    [lag] = json.loads(dumps(incident_dict(incident)))["laggards"]
    assert (lag["rank"], lag["counter"]) == (3, 117)
    console = Console(file=io.StringIO(), width=80, height=24, record=True)
    reporter = ConsoleReporter(io.StringIO(), now=lambda: 0.0,
                               console=Console(file=io.StringIO(), width=80, height=24))
    reporter.incident(incident)
    reporter.live.stop()
    console.print(reporter.frame())
    screen = console.export_text()
    assert "Weight sync [weight_sync], step Waiting for rollout weights" in screen
    assert "laggard: rank 3 (rank3.log): at step 117 while ranks 0,1,2 reached step" in screen


def test_recovery_takes_the_stall_off_the_top_of_the_live_view():
    reporter = ConsoleReporter(io.StringIO(), now=lambda: 0.0,
                               console=Console(file=io.StringIO(), width=80, height=24))
    reporter.incident(Incident(STALL, "/reports/x", STALL.advice))
    reporter.event(RecoveredEvent("weight_sync", 75.0, "t.log", 9, 0.0))
    reporter.live.stop()
    console = Console(file=io.StringIO(), width=80, height=24, record=True)
    console.print(reporter.frame())
    screen = console.export_text()
    assert "STALL" not in screen.splitlines()[0] and "recovered" in screen
