"""What an alert says, as plain JSON data: pure functions, no I/O.

One payload shape serves every target: a webhook receives it as is, an exec command on stdin
(and its scalars as `HANGWATCH_*` variables), Alertmanager as a postable alert built from it.
Every string passes through the secret redaction used for reports, and `text` is escaped for
Slack's message format, so hostile log text reaches no receiver raw.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from hangwatch.core.durations import format_duration
from hangwatch.core.events import BlindEvent, Incident, RecoveredEvent, StallEvent
from hangwatch.escape.redact import redact_tree

TOP_ADVICE = 3
ALERT_NAMES = {"stall": "HangwatchStall", "blind": "HangwatchBlind"}


@dataclass(frozen=True)
class Origin:
    """Who raises the alert: the watch (a job name) and the host it runs on."""

    watch: str
    host: str
    generator_url: str | None = None  # where a human can look (Alertmanager shows it)


def episode_id(origin: Origin, started_wall: float, kind: str = "stall",
               subject: str = "") -> str:
    """Stable for one episode: the same watch, host and start second (and log, for a blind
    one) give the same id, so a receiver can dedupe repeats (a restart re-sending, delivery
    at least once)."""
    key = f"{kind}\n{origin.watch}\n{origin.host}\n{subject}\n{int(started_wall)}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def stall_started(stall: StallEvent) -> float:
    """Wall time of the last progress before the stall: the episode's start."""
    return stall.wall - stall.idle_s


def stall_payload(stall: StallEvent, origin: Origin, episode: str,
                  incident: Incident | None = None) -> dict[str, Any]:
    """The alert for a stall; with its incident once evidence was gathered (report, advice
    chosen by evidence, findings), else with the engine's own advice."""
    advice = incident.advice if incident is not None else stall.advice
    payload: dict[str, Any] = {
        "event": "stall",
        "episode": episode,
        **_who(origin),
        "phase": stall.phase,
        "phase_title": stall.phase_title,
        "last_completed": stall.last_completed,
        "step": _jsonable(getattr(stall, "step", None)),
        "idle_s": round(stall.idle_s, 3),
        "threshold_s": stall.threshold_s,
        "laggards": _jsonable(list(getattr(stall, "laggards", None) or ())),
        "report": incident.report if incident is not None else None,
        "advice": [a.text for a in advice[:TOP_ADVICE]],
        "findings": list(incident.findings) if incident is not None else [],
        **_suspect(incident),
        "since": stall_started(stall),
        "time": stall.wall,
    }
    return _finish(payload)


def recovered_payload(opened: Mapping[str, Any], wall: float,
                      event: RecoveredEvent | None = None) -> dict[str, Any]:
    """The end of the episode `opened` (a stall or blind payload): same episode, same labels."""
    payload: dict[str, Any] = {
        "event": "recovered",
        "episode": opened["episode"],
        "recovered_from": opened["event"],
        # The stall's labels (suspect_rank too), so that the receiver resolves the same alert.
        **{k: opened.get(k) for k in ("watch", "job", "host", "phase", "phase_title", "log",
                                      "suspect_rank")},
        "stalled_s": round(event.stalled_s, 3) if event is not None else
        round(max(0.0, wall - opened["since"]), 3),
        "since": opened["since"],
        "time": wall,
    }
    if event is not None:
        payload["source"], payload["line"] = event.source, event.line
    return _finish({k: v for k, v in payload.items() if v is not None or k == "phase"})


def blind_payload(event: BlindEvent, origin: Origin, episode: str) -> dict[str, Any]:
    """hangwatch cannot see a log (unreadable, deleted) or a glob matches nothing any more."""
    payload: dict[str, Any] = {
        "event": "blind",
        "episode": episode,
        **_who(origin),
        "phase": None,
        "log": event.path,
        "what": event.what,
        "reason": event.reason,
        "blind_s": round(event.blind_s, 3),
        "since": event.wall - event.blind_s,
        "time": event.wall,
    }
    return _finish(payload)


def summary_text(payload: Mapping[str, Any]) -> str:
    """One human line: phase, idle time, host, first advice. Plain text, not yet escaped."""
    who = f"{payload.get('watch')} on {payload.get('host')}"
    phase = payload.get("phase_title") or payload.get("phase")
    event = payload["event"]
    if event == "stall":
        where = f"in {phase}" if phase else "with no phase open"
        line = (f"hangwatch: {who} stalled {where}: no progress for "
                f"{format_duration(payload.get('idle_s') or 0)}")
        advice = payload.get("advice") or []
        return f"{line}. {advice[0]}" if advice else line
    if event == "blind":
        return f"hangwatch: {who} cannot see {payload.get('log')}: {payload.get('reason')}"
    cause = "blind" if payload.get("recovered_from") == "blind" else "stalled"
    return (f"hangwatch: {who} recovered after {format_duration(payload.get('stalled_s') or 0)}"
            f" {cause}" + (f" in {phase}" if phase and cause == "stalled" else ""))


def slack_escape(text: str) -> str:
    """Slack's message format gives &, < and > meaning (links, mentions): escape them."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def alertmanager_alerts(payload: Mapping[str, Any], *, now: float,
                        valid_s: float) -> list[dict[str, Any]]:
    """The postable alerts (Alertmanager API v2) for one payload. A firing alert carries an
    `endsAt` `valid_s` ahead, as Prometheus does: re-sent while it lasts, it stays firing;
    if hangwatch dies it resolves by itself (and HangwatchDown takes over)."""
    opened = payload.get("recovered_from", payload["event"])
    labels = {"alertname": ALERT_NAMES.get(opened, "HangwatchStall"),
              "job": str(payload.get("job")), "host": str(payload.get("host"))}
    if opened == "blind":
        labels["log"] = str(payload.get("log"))
    else:
        labels["phase"] = str(payload.get("phase") or "none")
        # A rank number is a bounded label; the frame text stays in the annotations.
        if isinstance(payload.get("suspect_rank"), int):
            labels["suspect_rank"] = str(payload["suspect_rank"])
    ends = payload["time"] if payload["event"] == "recovered" else now + valid_s
    alert: dict[str, Any] = {
        "labels": labels,
        "annotations": {"summary": summary_text(payload), "description": _description(payload),
                        "episode": str(payload["episode"])},
        "startsAt": rfc3339(payload["since"]),
        "endsAt": rfc3339(ends),
    }
    if payload.get("report"):
        alert["annotations"]["report"] = str(payload["report"])
    if payload.get("suspect"):
        alert["annotations"]["suspect"] = str(payload["suspect"])
    if payload.get("generator_url"):
        alert["generatorURL"] = str(payload["generator_url"])
    return [alert]


def rfc3339(wall: float) -> str:
    stamp = datetime.fromtimestamp(wall, tz=timezone.utc)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"


def scalar_env(payload: Mapping[str, Any]) -> dict[str, str]:
    """`HANGWATCH_<KEY>` for each scalar of the payload (lists stay on stdin). A NUL cannot
    be in an environment variable, so it is dropped."""
    env: dict[str, str] = {}
    for key, value in payload.items():
        if value is None or isinstance(value, (list, dict)):
            continue
        env[f"HANGWATCH_{key.upper()}"] = str(value).replace("\0", "")
    return env


def _description(payload: Mapping[str, Any]) -> str:
    lines = [summary_text(payload)]
    if payload.get("last_completed"):
        lines.append(f"last completed phase: {payload['last_completed']}")
    if payload.get("laggards"):
        lines.append(f"laggards: {payload['laggards']}")
    if payload.get("suspect"):
        lines.append(f"suspect: {payload['suspect']}")
    lines.extend(f"advice: {a}" for a in payload.get("advice") or [])
    lines.extend(f"finding: {f}" for f in payload.get("findings") or [])
    if payload.get("report"):
        lines.append(f"report: {payload['report']}")
    return "\n".join(lines)


def _suspect(incident: Incident | None) -> dict[str, Any]:
    """Who holds the job up, from its stacks: the first suspect's why (or where the job is
    stuck as a whole) and that suspect's rank; nothing without stack groups."""
    if incident is None or not (incident.suspects or incident.stack_groups):
        return {}
    first = incident.suspects[0] if incident.suspects else {}
    rank = first.get("rank")
    return {"suspect": str(first.get("why") or incident.stack_summary),
            "suspect_rank": rank if isinstance(rank, int) and not isinstance(rank, bool)
            else None}


def _who(origin: Origin) -> dict[str, Any]:
    who: dict[str, Any] = {"watch": origin.watch, "job": origin.watch, "host": origin.host}
    if origin.generator_url:
        who["generator_url"] = origin.generator_url
    return who


def _finish(payload: dict[str, Any]) -> dict[str, Any]:
    payload = redact_tree(payload)
    payload["text"] = slack_escape(summary_text(payload))
    return payload


def _jsonable(value: Any) -> Any:
    """Fields the engine may add later (step, laggards) in a JSON-safe form."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _jsonable(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
