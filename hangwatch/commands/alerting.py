"""Alerts and metrics for `watch` and `run`, built from their flags: the extra reporters and
loop hooks a session needs, and what to close when it ends."""

from __future__ import annotations

import argparse
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from hangwatch.errors import HangwatchError
from hangwatch.reporters.base import Reporter
from hangwatch.session.session import TurnHook

if TYPE_CHECKING:
    from hangwatch.alerts.sender import Sender
    from hangwatch.metrics.server import MetricsServer

LOOP_PERIOD_S = 2.0  # with --metrics the loop turns at least this often; /healthz allows 3x
DRAIN_S = 10.0  # on the way out, pending alerts get this long before they stay spooled


@dataclass
class Alerting:
    reporters: list[Reporter] = field(default_factory=list)
    on_turn: list[TurnHook] = field(default_factory=list)
    turn_s: float | None = None
    sender: Sender | None = None
    server: MetricsServer | None = None

    def close(self, err: TextIO) -> None:
        if self.sender is not None:
            for left in self.sender.close(DRAIN_S):
                print(f"hangwatch: {left.count} alert(s) for {left.spec.display} not delivered "
                      f"yet; kept in {left.where}, sent by the next hangwatch using it",
                      file=err, flush=True)
        if self.server is not None:
            self.server.close()


def start(args: argparse.Namespace, *, name: str, logs: Sequence[str], err: TextIO) -> Alerting:
    """Check every flag first (exit 2 before anything starts), then start the sender thread
    and the metrics server."""
    from hangwatch.alerts.targets import specs_from_flags

    try:
        specs = specs_from_flags(args.webhook, args.alertmanager, args.alert_exec)
        listen = _listen(args.metrics)
    except ValueError as exc:
        raise HangwatchError(str(exc)) from None
    alerting = Alerting()

    def log(message: str) -> None:
        print(f"hangwatch: {message}", file=err, flush=True)

    sender = None
    if specs:
        from hangwatch.alerts.payload import Origin
        from hangwatch.alerts.reporter import AlertReporter
        from hangwatch.alerts.sender import Sender
        from hangwatch.alerts.spool import spool_root

        sender = Sender(specs, spool_root(args.state_dir), log=log).start()
        alerting.sender = sender
        alerting.reporters.append(AlertReporter(sender.submit, Origin(name, socket.gethostname())))
    if listen is not None:
        from hangwatch.metrics.server import MetricsHub, MetricsServer

        hub = MetricsHub()
        watch = hub.watch(name, logs, period_s=LOOP_PERIOD_S)
        if sender is not None:
            hub.add_alert_stats(sender.stats)
        alerting.server = MetricsServer(hub, *listen)
        alerting.reporters.append(watch)
        alerting.on_turn.append(watch.turned)
        alerting.turn_s = LOOP_PERIOD_S
    return alerting


def _listen(text: str | None) -> tuple[str, int] | None:
    if text is None:
        return None
    from hangwatch.metrics.listen import parse_listen

    try:
        return parse_listen(text)
    except ValueError as exc:
        raise ValueError(f"--metrics {exc}") from None


def default_name(args: argparse.Namespace, logs: Sequence[str],
                 argv: Sequence[str] = ()) -> str:
    """`--name`, else the command's name (`python train.py` -> `train`), else the log's."""
    if args.name:
        return str(args.name)
    if argv:
        program = Path(argv[0]).name
        rest = list(argv[1:])
        if program.startswith("python") and rest[:1] == ["-m"] and len(rest) > 1:
            return rest[1]
        if program.startswith("python") and rest and not rest[0].startswith("-"):
            return Path(rest[0]).stem
        return program
    return Path(logs[0]).stem if logs else "hangwatch"
