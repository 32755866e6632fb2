"""The watch loop's events as alerts: one per stall episode, then its `recovered`.

A stall is alerted once its incident is ready (the report path and the advice chosen by
evidence belong in the alert); a recovery that comes first waits for it, so the receiver
always sees the stall before its end. `BlindEvent` (serve cannot see a log or a glob) opens
a blind episode for its `path`, `ReadableEvent` ends it.

A service keeps `open_episodes()` in its state and hands them to `restore` after a restart:
a stall that fires again before any progress is the same episode, not alerted twice, and its
recovery is still sent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from hangwatch.alerts.payload import (
    Origin,
    blind_payload,
    episode_id,
    recovered_payload,
    stall_payload,
    stall_started,
)
from hangwatch.core.events import (
    BlindEvent,
    Event,
    Incident,
    Notice,
    ReadableEvent,
    RecoveredEvent,
    StallEvent,
)
from hangwatch.reporters.base import View

Submit = Callable[[Mapping[str, Any]], None]
EpisodeFor = Callable[[StallEvent], str]


class AlertReporter:
    """`episode_for` names a stall's episode; by default a hash of the watch, host and the
    stall's start. A service passes the id its state keeps, stable across restarts."""

    def __init__(self, submit: Submit, origin: Origin,
                 episode_for: EpisodeFor | None = None) -> None:
        self.submit = submit
        self.origin = origin
        self.episode_for = episode_for or (lambda stall: episode_id(origin,
                                                                    stall_started(stall)))
        self._gathering: tuple[StallEvent, str] | None = None  # stall awaiting its incident
        self._early_recovery: RecoveredEvent | None = None
        self._open: Mapping[str, Any] | None = None  # the stall alerted, not yet recovered
        self._blind: dict[str, Mapping[str, Any]] = {}  # blind episodes by log path

    def notice(self, notice: Notice) -> None:
        """File notices are not alerts: a log blind for longer than the threshold is."""

    def event(self, event: Event) -> None:
        if isinstance(event, StallEvent):
            if self._open is not None:
                return  # restored from before a restart: the same episode goes on
            self._gathering = (event, self.episode_for(event))
        elif isinstance(event, RecoveredEvent):
            if self._gathering is not None:
                self._early_recovery = event
            elif self._open is not None:
                self.submit(recovered_payload(self._open, event.wall, event))
                self._open = None
        elif isinstance(event, BlindEvent):
            self._went_blind(event)
        elif isinstance(event, ReadableEvent):
            opened = self._blind.pop(event.path, None)
            if opened is not None:
                self.submit(recovered_payload(opened, event.wall))

    def _went_blind(self, event: BlindEvent) -> None:
        if event.path in self._blind:
            return  # one alert per episode
        since = event.wall - event.blind_s
        payload = blind_payload(event, self.origin,
                                episode_id(self.origin, since, "blind", event.path))
        self._blind[event.path] = payload
        self.submit(payload)

    def incident(self, incident: Incident | None) -> None:
        if self._gathering is None:
            return
        stall, episode = self._gathering
        self._gathering = None
        self._open = stall_payload(stall, self.origin, episode, incident)
        self.submit(self._open)
        if self._early_recovery is not None:
            event, self._early_recovery = self._early_recovery, None
            self.submit(recovered_payload(self._open, event.wall, event))
            self._open = None

    def open_episodes(self) -> list[Mapping[str, Any]]:
        """The alerts of the episodes alerted and not yet recovered, for a service's state."""
        return [*([self._open] if self._open is not None else []), *self._blind.values()]

    def restore(self, episodes: list[Mapping[str, Any]],
                keep_firing: Submit = lambda _: None) -> None:
        """`keep_firing` is `Sender.keep_firing`: Alertmanager re-posts of these resume."""
        for payload in episodes:
            keep_firing(payload)
            if payload.get("event") == "blind":
                self._blind[str(payload.get("log"))] = payload
            elif payload.get("event") == "stall":
                self._open = payload

    def refresh(self, view: View) -> None:
        """Alerts are sent on events only."""

    def close(self) -> None:
        """A stall whose evidence never came (the watch ended first) is still alerted."""
        self.incident(None)
