"""serve's alerts and metrics: one alert sender and one metrics endpoint for all the watches,
set from the config's `alerts:` and `metrics:` at the start and again on every reload.

Per watch, an AlertReporter and a WatchMetrics live as long as the watch: a reload that keeps
the watch keeps its open episodes and its counts. An alert passes through the watch's state
twice. Once made, it is kept as `unspooled` (the state written on the loop's next turn holds
it). Once the sender has it on disk in every target's spool, the loop drops it from there
and, for a stall, marks the episode alerted. Whenever hangwatch is killed, a restart finds
the alert in a spool (sent from there), or in the state (submitted again), or finds its
episode neither reported nor alerted (reported again): at least once, and an episode whose
alert got out is not alerted again. The one window for a repeat, between the spool's write
and the state's, resends the same `episode`, which receivers dedupe on.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hangwatch.alerts.payload import Origin, episode_id, stall_started
from hangwatch.alerts.reporter import AlertReporter
from hangwatch.core.events import StallEvent
from hangwatch.errors import HangwatchError
from hangwatch.reporters.base import Reporter
from hangwatch.service.config import MetricsConfig, ServiceConfig
from hangwatch.service.globs import is_glob
from hangwatch.service.runtime import Outputs, WatchRuntime

if TYPE_CHECKING:
    from hangwatch.alerts.sender import Sender, Undelivered
    from hangwatch.metrics.per_watch import WatchMetrics
    from hangwatch.metrics.server import MetricsHub, MetricsServer

PERIOD_S = 2.0  # with metrics on, the loop turns at least this often; /healthz allows 3x
Post = Callable[[Callable[[], None]], None]  # run a function on the loop thread, from any
Log = Callable[[str], None]
Console = Callable[[WatchRuntime], Sequence[Reporter]]


class _WatchAlerts:
    """One watch's AlertReporter, and the alerts its state must keep (see the module)."""

    def __init__(self, runtime: WatchRuntime, sender: Sender, post: Post) -> None:
        saved = runtime.kept.get("alerts")
        saved = saved if isinstance(saved, dict) else {}
        self.runtime = runtime
        self.sender = sender
        self.post = post
        self.origin = Origin(runtime.name, socket.gethostname())
        self.unspooled: list[Mapping[str, Any]] = _payloads(saved.get("unspooled"))
        self.reporter = AlertReporter(self._submit, self.origin, episode_for=self._episode)
        self.reporter.restore(_payloads(saved.get("open")), keep_firing=sender.keep_firing)
        for payload in self.unspooled:  # made before a restart, maybe never spooled
            self._send(payload)
        runtime.keepers["alerts"] = self._keep

    def _episode(self, stall: StallEvent) -> str:
        """The id the watch's state keeps for the episode (opened before outputs see it)."""
        episode = self.runtime.episode
        return episode.id if episode is not None else episode_id(self.origin,
                                                                 stall_started(stall))

    def _submit(self, payload: Mapping[str, Any]) -> None:
        self.unspooled.append(payload)
        self.runtime.save_soon()
        self._send(payload)

    def _send(self, payload: Mapping[str, Any]) -> None:
        self.sender.submit(payload, on_spooled=lambda: self.post(lambda: self._spooled(payload)))

    def _spooled(self, payload: Mapping[str, Any]) -> None:
        self.unspooled = [p for p in self.unspooled if p is not payload]
        if payload.get("event") == "stall":
            self.runtime.mark_alerted(str(payload.get("episode")))
        self.runtime.save_soon()

    def _keep(self) -> dict[str, Any]:
        return {"open": list(self.reporter.open_episodes()), "unspooled": list(self.unspooled)}


class _WatchParts:
    def __init__(self, runtime: WatchRuntime) -> None:
        self.runtime = runtime
        self.alerts: _WatchAlerts | None = None
        self.metrics: WatchMetrics | None = None


class ServiceOutputs:
    """The watches' outputs: `console` (what serve prints) plus alerts and metrics. It is
    the watches' reporter factory; the service calls `configure` at the start and on each
    reload, `drop` for a watch a reload removed, and `close` on the way out."""

    def __init__(self, console: Console, *, post: Post, log: Log) -> None:
        self.console = console
        self.post = post
        self.log = log
        self.sender: Sender | None = None
        self.hub: MetricsHub | None = None
        self.server: MetricsServer | None = None
        self.listen: MetricsConfig | None = None
        self._parts: dict[str, _WatchParts] = {}

    # --- the service's calls ---------------------------------------------------------------

    def configure(self, config: ServiceConfig, *, starting: bool = False) -> None:
        """Targets and metrics address as `config` says. At the start, a metrics address that
        cannot be listened on is an error (HangwatchError); on a reload it is logged and the
        service goes on without metrics."""
        self._alert_targets(config)
        try:
            self._metrics(config.metrics)
        except HangwatchError as exc:
            if starting:
                raise
            self.log(f"metrics: {exc}; metrics are off until a reload fixes it")

    def __call__(self, runtime: WatchRuntime) -> Outputs:
        """A watch's outputs, for its session (built anew by each reload)."""
        parts = self._parts.get(runtime.name)
        if parts is None or parts.runtime is not runtime:
            parts = self._parts[runtime.name] = _WatchParts(runtime)
        reporters: list[Reporter] = list(self.console(runtime))
        if self.sender is not None:
            if parts.alerts is None:
                parts.alerts = _WatchAlerts(runtime, self.sender, self.post)
            reporters.append(parts.alerts.reporter)
        if self.server is None:
            self._drop_metrics(parts)
            return Outputs(reporters)
        if parts.metrics is None:
            assert self.hub is not None
            parts.metrics = self.hub.watch(runtime.name, _files(runtime), period_s=PERIOD_S)
        metrics = parts.metrics

        def follow_files(_engine: Any) -> None:
            metrics.set_logs(_files(runtime))

        return Outputs([*reporters, metrics], on_turn=[follow_files, metrics.turned],
                       turn_s=PERIOD_S)

    def drop(self, name: str) -> None:
        """A watch a reload removed: its series go, its episodes with it."""
        parts = self._parts.pop(name, None)
        if parts is not None:
            self._drop_metrics(parts)

    def close(self, drain_s: float) -> None:
        """Alerts get `drain_s` to go out (what is left stays spooled for the next start),
        then the metrics endpoint closes."""
        if self.sender is not None:
            self._undelivered(self.sender.close(drain_s))
        if self.server is not None:
            self.server.close()
            self.server = None

    # --- alerts ----------------------------------------------------------------------------

    def _alert_targets(self, config: ServiceConfig) -> None:
        specs = list(config.alerts)
        if self.sender is not None:
            if specs != self.sender.specs:
                self._undelivered(self.sender.retarget(specs))
            return
        if not specs:
            return
        from hangwatch.alerts.sender import Sender
        from hangwatch.alerts.spool import spool_root

        self.sender = Sender(specs, spool_root(config.state_dir), log=self.log).start()
        if self.hub is not None:
            self.hub.add_alert_stats(self.sender.stats)

    def _undelivered(self, left: list[Undelivered]) -> None:
        for item in left:
            self.log(f"{item.count} alert(s) for {item.spec.display} not delivered yet; kept "
                     f"in {item.where}, sent by the next hangwatch using it")

    # --- metrics ---------------------------------------------------------------------------

    def _metrics(self, listen: MetricsConfig | None) -> None:
        if listen == self.listen and (self.server is not None or listen is None):
            return
        from hangwatch.metrics.server import MetricsHub, MetricsServer

        if self.hub is None:
            self.hub = MetricsHub()
            if self.sender is not None:
                self.hub.add_alert_stats(self.sender.stats)
        old, self.server, self.listen = self.server, None, listen
        if listen is None:
            if old is not None:
                old.close()
            return
        try:
            self.server = MetricsServer(self.hub, listen.host, listen.port)
        except HangwatchError:
            if old is None:
                raise
            old.close()  # the new address may be the old port on another host
            old = None
            self.server = MetricsServer(self.hub, listen.host, listen.port)
        finally:
            if old is not None:
                old.close()

    def _drop_metrics(self, parts: _WatchParts) -> None:
        if parts.metrics is not None and self.hub is not None:
            self.hub.remove(parts.metrics)
        parts.metrics = None


def _files(runtime: WatchRuntime) -> list[str]:
    """The files a watch follows; before its globs are scanned, its plain paths."""
    return list(runtime.followers) or [p for p in runtime.config.logs if not is_glob(p)]


def _payloads(value: Any) -> list[Mapping[str, Any]]:
    """Alerts as a state file kept them; anything else (a hand-edited file) is skipped."""
    if not isinstance(value, list):
        return []
    return [p for p in value if isinstance(p, dict) and "event" in p and "episode" in p]
