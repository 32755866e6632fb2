"""`hangwatch serve`: always on beside the jobs, as a systemd service or a Kubernetes sidecar.

`--config FILE` names the watches; without it, the LOGs and flags make one watch. See
hangwatch/service/ for the loop, the state kept across restarts, systemd's protocol, and how
the config's `alerts:` and `metrics:` reach each watch (service/outputs.py).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from hangwatch.alerts.targets import specs_from_flags
from hangwatch.errors import ExitStatus, HangwatchError
from hangwatch.metrics.listen import parse_listen
from hangwatch.reporters.base import Reporter
from hangwatch.service.config import (
    MetricsConfig,
    ServiceConfig,
    WatchConfig,
    load_service_config,
)
from hangwatch.service.globs import is_glob
from hangwatch.service.runtime import WatchRuntime


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from hangwatch.service.server import Service, load_watch_rules

    if args.check_config:
        config = load_service_config(Path(args.check_config))
        load_watch_rules(config.watches)
        _describe(config, out)
        return ExitStatus.OK
    config = _config(args)
    rules = load_watch_rules(config.watches)

    def make_reporters(watch: WatchRuntime) -> Sequence[Reporter]:
        if args.json:
            from hangwatch.reporters.jsonl import JsonReporter

            return [JsonReporter(out, {"watch": watch.name})]
        from hangwatch.reporters.plain import PlainReporter

        return [PlainReporter(out, prefix=f"[{watch.name}] ")]

    return Service(config, rules, make_reporters=make_reporters, err=err,
                   poll=args.poll).run()


def _config(args: argparse.Namespace) -> ServiceConfig:
    if args.config and args.logs:
        raise HangwatchError("serve: give either --config FILE or LOG paths, not both")
    if args.config:
        return load_service_config(Path(args.config))
    if not args.logs:
        raise HangwatchError("serve: give --config FILE, or the LOG paths of one watch")
    state_dir = Path(args.state_dir) if args.state_dir else None
    try:
        alerts = specs_from_flags(args.webhook, args.alertmanager, args.alert_exec)
    except ValueError as exc:
        raise HangwatchError(f"serve: {exc}") from None
    try:
        metrics = MetricsConfig(*parse_listen(args.metrics)) if args.metrics else None
    except ValueError as exc:
        raise HangwatchError(f"serve: --metrics {exc}") from None
    watch = WatchConfig(name=args.name, logs=tuple(args.logs), stall=args.stall,
                        rules=tuple(Path(p) for p in args.rules),
                        report_dir=Path(args.report_dir), snapshot=args.snapshot,
                        stacks=args.stacks, native=args.native, pid=tuple(args.pid),
                        match=args.match, stall_given=args.stall_given)
    return ServiceConfig("", state_dir, (watch,), metrics, tuple(alerts))


def _describe(config: ServiceConfig, out: TextIO) -> None:
    print(f"{config.file}: ok", file=out)
    print(f"  state_dir: {config.state_dir or 'none (a restart reads the logs again)'}",
          file=out)
    if config.metrics is not None:
        print(f"  metrics: {config.metrics}", file=out)
    for target in config.alerts:
        print(f"  alert: {target.display}", file=out)
    for watch in config.watches:
        globs = sum(1 for p in watch.logs if is_glob(p))
        print(f"  watch {watch.name}: {len(watch.logs) - globs} logs, {globs} globs, stall "
              f"{watch.stall:g}s, reports in {watch.report_dir}", file=out)
