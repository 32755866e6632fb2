"""`/metrics` (Prometheus text format) and `/healthz`, served on threads of their own.

The metric names are a contract (dashboards and alerting rules use them); each is produced
here from the watches' samples and the alert senders' counts at scrape time. Labels are
watch names, log paths, rule ids and target kinds: never text from a log.
"""

from __future__ import annotations

import platform
import socket
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, ProcessCollector, make_wsgi_app
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)

from hangwatch import __version__
from hangwatch.errors import HangwatchError
from hangwatch.metrics.listen import format_listen
from hangwatch.metrics.per_watch import WatchMetrics, WatchSample

HEALTHY_TURNS = 3  # /healthz fails once a loop has not turned for this many periods
AlertStats = Callable[[], Iterable[Any]]  # yields hangwatch.alerts.sender.TargetStats

NAMES = (
    "hangwatch_seconds_since_progress", "hangwatch_stalled", "hangwatch_phase",
    "hangwatch_phase_duration_seconds", "hangwatch_lines_total", "hangwatch_signals_total",
    "hangwatch_stalls_total", "hangwatch_alerts_total", "hangwatch_alert_failures_total",
    "hangwatch_alert_spool", "hangwatch_log_readable", "hangwatch_loop_last_timestamp_seconds",
    "hangwatch_build_info", "hangwatch_rank_seconds_since_progress",
)


class MetricsHub:
    """Every watch of this process and its alert senders, as one Prometheus collector."""

    def __init__(self) -> None:
        self._watches: list[WatchMetrics] = []
        self._alert_stats: list[AlertStats] = []
        self._lock = threading.Lock()

    def watch(self, name: str, logs: Sequence[str], *, period_s: float) -> WatchMetrics:
        metrics = WatchMetrics(name, logs, period_s=period_s)
        with self._lock:
            self._watches.append(metrics)
        return metrics

    def remove(self, metrics: WatchMetrics) -> None:
        """A watch dropped (a reload): its series go with it."""
        with self._lock:
            self._watches = [w for w in self._watches if w is not metrics]

    def add_alert_stats(self, stats: AlertStats) -> None:
        with self._lock:
            self._alert_stats.append(stats)

    def samples(self) -> list[WatchSample]:
        with self._lock:
            watches = list(self._watches)
        return [w.sample() for w in watches]

    def health(self) -> tuple[bool, str]:
        late = [f"{s.name}: the loop has not turned for {s.turn_age_s:.0f}s "
                f"(period {s.period_s:g}s)"
                for s in self.samples() if s.turn_age_s > HEALTHY_TURNS * s.period_s]
        return (not late, "\n".join(late) if late else "ok")

    def collect(self) -> Iterator[Metric]:
        samples = self.samples()
        yield from _watch_metrics(samples)
        yield from self._alert_metrics()
        turned = [s.last_turn_wall for s in samples if s.last_turn_wall is not None]
        loop = GaugeMetricFamily("hangwatch_loop_last_timestamp_seconds",
                                 "When the slowest watch loop last turned (Unix time)")
        if turned:
            loop.add_metric([], min(turned))
        yield loop
        info = InfoMetricFamily("hangwatch_build", "hangwatch version")
        info.add_metric([], {"version": __version__, "python": platform.python_version()})
        yield info

    def _alert_metrics(self) -> Iterator[Metric]:
        with self._lock:
            sources = list(self._alert_stats)
        total = CounterMetricFamily("hangwatch_alerts_total", "Alerts by final outcome",
                                    labels=["target", "result"])
        failures = CounterMetricFamily("hangwatch_alert_failures_total",
                                       "Failed delivery attempts, retries included",
                                       labels=["target"])
        spool = GaugeMetricFamily("hangwatch_alert_spool", "Alerts waiting in the spool",
                                  labels=["target"])
        for stats in sources:
            for target in stats():
                for result, count in sorted(target.results.items()):
                    total.add_metric([target.label, result], count)
                failures.add_metric([target.label], target.failures)
                spool.add_metric([target.label], target.spooled)
        yield from (total, failures, spool)


def _watch_metrics(samples: Sequence[WatchSample]) -> Iterator[Metric]:
    since = GaugeMetricFamily("hangwatch_seconds_since_progress",
                              "Seconds since the job last made progress", labels=["watch", "log"])
    stalled = GaugeMetricFamily("hangwatch_stalled", "1 while a stall episode is open",
                                labels=["watch"])
    phase = GaugeMetricFamily("hangwatch_phase", "1 for the phase in progress, 0 for others seen",
                              labels=["watch", "phase"])
    duration = GaugeMetricFamily("hangwatch_phase_duration_seconds",
                                 "The phase in progress so far, or the last run of a finished one",
                                 labels=["watch", "phase"])
    lines = CounterMetricFamily("hangwatch_lines_total", "Log lines read",
                                labels=["watch", "log"])
    signals = CounterMetricFamily("hangwatch_signals_total", "Signal lines seen",
                                  labels=["watch", "signal", "severity"])
    stalls = CounterMetricFamily("hangwatch_stalls_total", "Stall episodes", labels=["watch"])
    ranks = GaugeMetricFamily("hangwatch_rank_seconds_since_progress",
                              "Seconds since each rank last made progress: the 64 lowest "
                              "rank numbers; rank=\"other\" is the most of the rest",
                              labels=["watch", "rank"])
    readable = GaugeMetricFamily("hangwatch_log_readable",
                                 "1 while hangwatch can read the log, 0 while it cannot",
                                 labels=["watch", "log"])
    for s in samples:
        stalled.add_metric([s.name], 1.0 if s.stalled else 0.0)
        stalls.add_metric([s.name], s.stalls)
        for log in s.logs:
            since.add_metric([s.name, log], s.seconds_since_progress)
        for log in sorted(set(s.logs) | set(s.lines)):
            lines.add_metric([s.name, log], s.lines.get(log, 0))
        for log, ok in sorted(s.readable.items()):
            readable.add_metric([s.name, log], 1.0 if ok else 0.0)
        for name, seconds in sorted(s.phases.items()):
            phase.add_metric([s.name, name], 1.0 if name == s.phase else 0.0)
            duration.add_metric([s.name, name], max(0.0, seconds))
        for (signal, severity), count in sorted(s.signals.items()):
            signals.add_metric([s.name, signal, severity], count)
        for rank, seconds in s.rank_idle.items():
            ranks.add_metric([s.name, rank], max(0.0, seconds))
        if s.other_ranks_idle is not None:
            ranks.add_metric([s.name, "other"], max(0.0, s.other_ranks_idle))
    yield from (since, stalled, phase, duration, lines, signals, stalls, readable, ranks)


# --- HTTP --------------------------------------------------------------------------------


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes every 15 s are not news."""


class MetricsServer:
    def __init__(self, hub: MetricsHub, host: str, port: int) -> None:
        self.hub = hub
        registry = CollectorRegistry(auto_describe=True)
        registry.register(hub)
        ProcessCollector(registry=registry)  # hangwatch's own CPU and memory
        metrics = make_wsgi_app(registry)

        def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
            path = environ.get("PATH_INFO", "")
            if path == "/healthz":
                ok, text = hub.health()
                start_response("200 OK" if ok else "503 Service Unavailable",
                               [("Content-Type", "text/plain; charset=utf-8")])
                return [text.encode() + b"\n"]
            if path in ("/metrics", "/"):
                return metrics(environ, start_response)
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found: try /metrics or /healthz\n"]

        server_class = type("Server", (_Server,), {
            "address_family": socket.AF_INET6 if ":" in host else socket.AF_INET})
        try:
            self._server: WSGIServer = make_server(host, port, app, server_class=server_class,
                                       handler_class=_QuietHandler)
        except OSError as exc:
            raise HangwatchError(f"--metrics {format_listen(host, port)}: cannot listen: "
                                 f"{exc.strerror or exc}") from None
        self.host = host
        self.port: int = self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="hangwatch-metrics", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
