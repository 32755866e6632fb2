"""Alert payloads: the JSON every target gets, and Alertmanager's postable alerts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

import jsonschema

from hangwatch.alerts.payload import (
    Origin,
    alertmanager_alerts,
    blind_payload,
    episode_id,
    recovered_payload,
    scalar_env,
    stall_payload,
)
from hangwatch.core.events import Advice, BlindEvent, Incident, RecoveredEvent, StallEvent

SCHEMA = json.loads((Path(__file__).parents[1] / "fixtures" / "alertmanager"
                     / "postable-alerts.schema.json").read_text())
ORIGIN = Origin("gkd-7b", "node-3")
NOW = 1_700_000_000.0


def stall(**overrides) -> StallEvent:
    fields = dict(phase="weight_sync", phase_title="Weight sync (NCCL)",
                  last_completed="rollout_init", idle_s=600.4, threshold_s=600.0, wall=NOW,
                  advice=(Advice("engine advice", "phase"),))
    fields.update(overrides)
    return StallEvent(**fields)


def incident(event: StallEvent, advice: int = 5, findings=("GPU 0 idle",)) -> Incident:
    return Incident(event, "/reports/x", tuple(Advice(f"do {i} <now> & then", "why")
                                               for i in range(advice)), tuple(findings))


def validate_postable(body) -> None:
    """Against the API v2 schema, date-time and uri formats checked as Alertmanager does."""
    checker = jsonschema.FormatChecker()

    @checker.checks("date-time", raises=ValueError)
    def _rfc3339(value: str) -> bool:
        return value.endswith("Z") and datetime.fromisoformat(value[:-1]) is not None

    @checker.checks("uri")
    def _uri(value: str) -> bool:
        parts = urlsplit(value)
        return bool(parts.scheme and parts.netloc)

    jsonschema.validate(body, SCHEMA, format_checker=checker)


def test_stall_payload_carries_the_contract_fields_and_top_three_advice():
    payload = stall_payload(stall(), ORIGIN, "ep1", incident(stall()))
    assert payload["event"] == "stall"
    assert (payload["watch"], payload["job"], payload["host"]) == ("gkd-7b", "gkd-7b", "node-3")
    assert (payload["phase"], payload["phase_title"], payload["last_completed"]) == (
        "weight_sync", "Weight sync (NCCL)", "rollout_init")
    assert (payload["idle_s"], payload["threshold_s"]) == (600.4, 600.0)
    assert payload["report"] == "/reports/x"
    assert payload["advice"] == ["do 0 <now> & then", "do 1 <now> & then", "do 2 <now> & then"]
    assert payload["findings"] == ["GPU 0 idle"]
    assert payload["time"] == NOW and payload["laggards"] == []
    json.dumps(payload)  # all of it is JSON


def test_text_is_one_slack_safe_line_with_phase_idle_host_and_first_advice():
    text = stall_payload(stall(), ORIGIN, "ep1", incident(stall()))["text"]
    assert "\n" not in text
    assert "Weight sync (NCCL)" in text and "10m00s" in text and "node-3" in text
    assert "do 0 &lt;now&gt; &amp; then" in text  # Slack reads <...> as a link or mention


def test_episode_id_is_stable_for_one_episode_and_differs_between_episodes():
    first = episode_id(ORIGIN, NOW - 600.4)
    assert first == episode_id(ORIGIN, NOW - 600.4)
    assert first != episode_id(ORIGIN, NOW + 60)
    assert first != episode_id(Origin("other", "node-3"), NOW - 600.4)
    assert first != episode_id(Origin("gkd-7b", "node-4"), NOW - 600.4)


def test_fields_the_engine_adds_later_are_read_when_present():
    @dataclass(frozen=True)
    class Laggard:
        rank: int
        idle_s: float

    @dataclass(frozen=True)
    class RankedStall(StallEvent):
        step: int | None = None
        laggards: tuple[Laggard, ...] = ()

    event = RankedStall(**{**stall().__dict__, "step": 1200,
                           "laggards": (Laggard(3, 640.0),)})
    payload = stall_payload(event, ORIGIN, "ep1")
    assert payload["step"] == 1200
    assert payload["laggards"] == [{"rank": 3, "idle_s": 640.0}]
    assert payload["advice"] == ["engine advice"]  # no incident yet: the engine's advice


def test_secrets_in_findings_are_redacted():
    leaky = incident(stall(), findings=("env HF_TOKEN=hf_abcdefghijklmnop", ))
    payload = stall_payload(stall(), ORIGIN, "ep1", leaky)
    assert "hf_abcdefghijklmnop" not in json.dumps(payload)


def test_recovered_keeps_the_episode_and_labels_of_the_stall():
    opened = stall_payload(stall(), ORIGIN, "ep1")
    event = RecoveredEvent("weight_sync", 42.0, "train.log", 17, NOW + 42)
    payload = recovered_payload(opened, event.wall, event)
    assert payload["event"] == "recovered" and payload["recovered_from"] == "stall"
    assert payload["episode"] == "ep1" and payload["phase"] == "weight_sync"
    assert payload["stalled_s"] == 42.0 and payload["line"] == 17
    assert "recovered after 42s" in payload["text"]


def test_alertmanager_firing_alert_matches_the_api_schema_with_labels_and_future_end():
    payload = stall_payload(stall(), Origin("gkd-7b", "node-3", "http://node-3:9464/"), "ep1",
                            incident(stall()))
    body = alertmanager_alerts(payload, now=NOW + 5, valid_s=240)
    validate_postable(body)
    [alert] = body
    assert alert["labels"] == {"alertname": "HangwatchStall", "job": "gkd-7b",
                               "host": "node-3", "phase": "weight_sync"}
    assert alert["startsAt"] == "2023-11-14T22:03:19.600Z"  # the last progress: NOW - 600.4
    assert alert["endsAt"] == "2023-11-14T22:17:25.000Z"  # NOW + 5 + 240
    assert alert["generatorURL"] == "http://node-3:9464/"
    assert set(alert["annotations"]) >= {"summary", "description"}
    assert "do 1 <now> & then" in alert["annotations"]["description"]


def test_alertmanager_recovery_sets_ends_at_to_the_recovery_with_the_same_labels():
    opened = stall_payload(stall(phase=None, phase_title=None), ORIGIN, "ep1")
    recovered = recovered_payload(opened, NOW + 30)
    [firing] = alertmanager_alerts(opened, now=NOW, valid_s=240)
    body = alertmanager_alerts(recovered, now=NOW + 31, valid_s=240)
    validate_postable(body)
    assert body[0]["labels"] == firing["labels"]
    assert body[0]["labels"]["phase"] == "none"
    assert body[0]["endsAt"] == "2023-11-14T22:13:50.000Z"


def test_a_blind_episode_is_its_own_alert_name_keyed_by_log():
    event = BlindEvent("/logs/rank1.log", "log", "deleted", 600.0, NOW)
    payload = blind_payload(event, ORIGIN, "b1")
    assert payload["event"] == "blind" and payload["log"] == "/logs/rank1.log"
    assert payload["since"] == NOW - 600.0 and payload["reason"] == "deleted"
    body = alertmanager_alerts(payload, now=NOW, valid_s=240)
    validate_postable(body)
    assert body[0]["labels"]["alertname"] == "HangwatchBlind"
    assert body[0]["labels"]["log"] == "/logs/rank1.log"


def test_exec_environment_holds_the_scalars_without_nul():
    payload = stall_payload(stall(phase_title="evil\0title"), ORIGIN, "ep1", incident(stall()))
    env = scalar_env(payload)
    assert env["HANGWATCH_EVENT"] == "stall" and env["HANGWATCH_EPISODE"] == "ep1"
    assert env["HANGWATCH_PHASE_TITLE"] == "eviltitle"
    assert "HANGWATCH_ADVICE" not in env  # lists are on stdin only


def stacked(event: StallEvent, why: str, rank: int | None = 2) -> Incident:
    group = {"where": "load_next_batch (train.py)", "frames": [], "pids": [11], "ranks": [rank],
             "count": 1, "phase": "data_load"}
    return Incident(event, "/reports/x", (), ("GPU 0 idle",), stack_groups=(group,),
                    suspects=({"pid": 11, "rank": rank, "where": group["where"],
                               "phase": "data_load", "why": why},), stack_summary=why)


def test_the_suspect_is_an_annotation_and_only_its_rank_a_label():
    why = "rank 2 is in `load_next_batch (train.py)` while ranks 0,1,3 wait in `all_reduce`"
    payload = stall_payload(stall(), ORIGIN, "ep1", stacked(stall(), why))
    assert payload["suspect"] == why and payload["suspect_rank"] == 2
    body = alertmanager_alerts(payload, now=NOW + 5, valid_s=240)
    validate_postable(body)
    [alert] = body
    assert alert["labels"] == {"alertname": "HangwatchStall", "job": "gkd-7b", "host": "node-3",
                               "phase": "weight_sync", "suspect_rank": "2"}
    assert alert["annotations"]["suspect"] == why
    assert f"suspect: {why}" in alert["annotations"]["description"]
    assert not any("load_next_batch" in v for v in alert["labels"].values())
    # The recovery carries the same labels, so the receiver resolves the same alert.
    recovered = recovered_payload(payload, NOW + 30)
    [resolved] = alertmanager_alerts(recovered, now=NOW + 31, valid_s=240)
    assert resolved["labels"] == alert["labels"]


def test_a_suspect_without_a_rank_gives_no_label_and_its_secrets_are_redacted():
    why = ("pid 11 is in `fetch (hf_abcdefghijklmnopqrstuvwxyz0123456789)` while pids 12,13 "
           "wait in `barrier`")
    payload = stall_payload(stall(), ORIGIN, "ep1", stacked(stall(), why, rank=None))
    assert "hf_abcdefghijklmnopqrstuvwxyz0123456789" not in json.dumps(payload)
    [alert] = alertmanager_alerts(payload, now=NOW, valid_s=240)
    assert "suspect_rank" not in alert["labels"] and "suspect" in alert["annotations"]
