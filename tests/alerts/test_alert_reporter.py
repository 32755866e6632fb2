"""Events to alerts: one per episode, then recovered, in that order."""

from __future__ import annotations

import json

from hangwatch.alerts.payload import Origin
from hangwatch.alerts.reporter import AlertReporter
from hangwatch.core.events import (
    BlindEvent,
    Incident,
    Notice,
    ReadableEvent,
    RecoveredEvent,
    StallEvent,
)

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


def test_blind_and_readable_events_one_alert_per_episode():
    rep, sent = reporter()
    rep.event(BlindEvent("/l/rank0.log", "log", "unreadable", 60.0, 100.0))
    rep.event(BlindEvent("/l/rank0.log", "log", "unreadable", 90.0, 130.0))
    rep.event(ReadableEvent("/l/rank0.log", "log", 110.0, 150.0))
    assert [a["event"] for a in sent] == ["blind", "recovered"]
    assert sent[0]["since"] == 40.0 and sent[0]["blind_s"] == 60.0 and sent[0]["what"] == "log"
    assert sent[1]["recovered_from"] == "blind" and sent[1]["episode"] == sent[0]["episode"]


def test_a_service_names_the_stall_episode_with_the_id_its_state_keeps():
    sent: list[dict] = []
    rep = AlertReporter(sent.append, ORIGIN, episode_for=lambda _stall: "job-100-abcd")
    event = stall(100.0)
    rep.event(event)
    rep.incident(Incident(event, "/r", ()))
    assert sent[0]["episode"] == "job-100-abcd"


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
