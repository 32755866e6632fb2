"""Events to alerts: one per episode, then recovered, in that order."""

from __future__ import annotations

import json
from dataclasses import dataclass

from hangwatch.alerts.payload import Origin
from hangwatch.alerts.reporter import AlertReporter
from hangwatch.core.events import Incident, Notice, RecoveredEvent, StallEvent

ORIGIN = Origin("job", "host")


def stall(wall: float, idle: float = 10.0) -> StallEvent:
    return StallEvent("weight_sync", "Weight sync", None, idle, 10.0, wall)


def reporter() -> tuple[AlertReporter, list[dict]]:
    sent: list[dict] = []
    return AlertReporter(sent.append, ORIGIN), sent


def test_one_alert_per_episode_and_a_recovered_for_each():
    rep, sent = reporter()
    for start in (100.0, 200.0):
        event = stall(start)
        rep.event(event)
        rep.incident(Incident(event, "/r", ()))
        rep.event(RecoveredEvent("weight_sync", 5.0, "log", 3, start + 5))
        rep.event(RecoveredEvent("weight_sync", 5.0, "log", 4, start + 6))  # no episode open
    assert [a["event"] for a in sent] == ["stall", "recovered", "stall", "recovered"]
    assert sent[0]["episode"] == sent[1]["episode"] != sent[2]["episode"] == sent[3]["episode"]
    assert sent[0]["report"] == "/r"


def test_a_recovery_before_the_evidence_is_ready_waits_for_the_stall_alert():
    rep, sent = reporter()
    event = stall(100.0)
    rep.event(event)
    rep.event(RecoveredEvent("weight_sync", 1.0, "log", 3, 101.0))
    assert sent == []
    rep.incident(Incident(event, "/r", ()))
    assert [a["event"] for a in sent] == ["stall", "recovered"]


def test_a_stall_whose_evidence_never_came_is_alerted_at_close():
    rep, sent = reporter()
    rep.event(stall(100.0))
    rep.notice(Notice("log", "deleted", "gone"))  # file notices alone are no alert
    rep.close()
    assert [a["event"] for a in sent] == ["stall"] and sent[0]["report"] is None


def test_blind_and_readable_events_are_known_by_name_one_alert_per_episode():
    @dataclass(frozen=True)
    class BlindEvent:
        path: str
        reason: str
        wall: float
        for_s: float

    @dataclass(frozen=True)
    class ReadableEvent:
        path: str
        wall: float

    rep, sent = reporter()
    rep.event(BlindEvent("/l/rank0.log", "unreadable", 100.0, 60.0))  # type: ignore[arg-type]
    rep.event(BlindEvent("/l/rank0.log", "unreadable", 130.0, 90.0))  # type: ignore[arg-type]
    rep.event(ReadableEvent("/l/rank0.log", 150.0))  # type: ignore[arg-type]
    assert [a["event"] for a in sent] == ["blind", "recovered"]
    assert sent[1]["recovered_from"] == "blind" and sent[1]["episode"] == sent[0]["episode"]


def test_restored_episodes_are_not_alerted_again_and_still_recover():
    before, sent_before = reporter()
    event = stall(100.0)
    before.event(event)
    before.incident(Incident(event, "/r", ()))
    saved = json.loads(json.dumps(before.open_episodes()))  # through a state file
    after, sent = reporter()  # the restarted service
    kept: list[dict] = []
    after.restore(saved, keep_firing=kept.append)
    assert kept == saved  # Alertmanager targets re-post it while it lasts
    again = stall(100.0, idle=40.0)  # the engine fires anew: no progress came in between
    after.event(again)
    after.incident(Incident(again, "/r2", ()))
    after.event(RecoveredEvent("weight_sync", 1.0, "log", 9, 200.0))
    assert [a["event"] for a in sent] == ["recovered"]
    assert sent[0]["episode"] == sent_before[0]["episode"]
    assert after.open_episodes() == []
