"""`hangwatch alert-test`: send a sample stall alert to each target now, once, and say what
each answered; exit 1 when any target failed, 2 for a bad flag or config."""

from __future__ import annotations

import argparse
import json
import socket
import time
from pathlib import Path
from typing import TextIO

from hangwatch.alerts.payload import Origin, episode_id, stall_payload
from hangwatch.alerts.settings import load_alert_targets
from hangwatch.alerts.targets import DeliveryError, TargetSpec, make_target, specs_from_flags
from hangwatch.core.events import Advice, Incident, StallEvent
from hangwatch.errors import ExitStatus, HangwatchError


def sample_payload(origin: Origin, now: float) -> dict[str, object]:
    stall = StallEvent(phase="alert_test", phase_title="hangwatch alert test",
                       last_completed=None, idle_s=600.0, threshold_s=600.0, wall=now)
    advice = (Advice("This is a test alert from `hangwatch alert-test`; no job is stalled.",
                     "hangwatch alert-test"),)
    return stall_payload(stall, origin, episode_id(origin, now, "test"),
                         Incident(stall, None, advice))


def targets(args: argparse.Namespace) -> list[TargetSpec]:
    try:
        specs = specs_from_flags(args.webhook, args.alertmanager, args.alert_exec)
    except ValueError as exc:
        raise HangwatchError(str(exc)) from None
    if args.config:
        specs.extend(load_alert_targets(Path(args.config)))
    if not specs:
        raise HangwatchError("alert-test: give --webhook URL, --alertmanager URL, "
                             "--alert-exec CMD or --config FILE")
    return specs


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    specs = targets(args)
    payload = sample_payload(Origin("alert-test", socket.gethostname()), time.time())
    failed = 0
    for spec in specs:
        started = time.monotonic()
        try:
            make_target(spec).send(payload)
            error = None
        except DeliveryError as exc:
            error = str(exc)
            failed += 1
        took = time.monotonic() - started
        if args.json:
            print(json.dumps({"target": spec.display, "ok": error is None, "error": error,
                              "seconds": round(took, 3)}), file=out)
        else:
            print(f"{spec.display}: " + ("sent" if error is None else f"FAILED: {error}")
                  + f" ({took:.2f}s)", file=out)
    return ExitStatus.CHECK_FAILED if failed else ExitStatus.OK
