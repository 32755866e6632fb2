"""`hangwatch LOG...`: follow logs live, report stalls with evidence and advice."""

from __future__ import annotations

import argparse
import contextlib
import signal
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from hangwatch.commands import alerting
from hangwatch.core.history import History
from hangwatch.errors import ExitStatus, HangwatchError
from hangwatch.packs.load import load_rule_set
from hangwatch.reporters.base import Reporter
from hangwatch.session.engines import engine_for
from hangwatch.session.evidence import evidence_collector
from hangwatch.session.preview import preview_within
from hangwatch.session.session import Session, SessionOptions

LIVE_REFRESH_S = 1.0


def history_for(args: argparse.Namespace, job: str, err: TextIO) -> tuple[History | None,
                                                                         list[Reporter]]:
    """`--history FILE`: the job's learned durations, and the reporter that keeps them."""
    if not getattr(args, "history", None):
        return None, []
    from hangwatch.reporters.history import HistoryWriter, load_history

    path = Path(args.history)
    history = load_history(path, job)
    return history, [HistoryWriter(path, job, history, err)]


def is_live(args: argparse.Namespace, out: TextIO) -> bool:
    return not args.json and not args.plain and out.isatty()


def summarized(args: argparse.Namespace) -> bool:
    """`--json` sums the history's phase events up in one `caught_up` event."""
    return bool(args.json) and not getattr(args, "replay", False)


def make_reporters(args: argparse.Namespace, out: TextIO) -> list[Reporter]:
    if args.json:
        from hangwatch.reporters.jsonl import JsonReporter

        return [JsonReporter(out, summarized=summarized(args)), *events_reporters(args)]
    if is_live(args, out):
        from hangwatch.reporters.console import ConsoleReporter

        return [ConsoleReporter(out), *events_reporters(args)]
    from hangwatch.reporters.plain import PlainReporter

    return [PlainReporter(out), *events_reporters(args)]


def events_reporters(args: argparse.Namespace) -> list[Reporter]:
    """`--events FILE`: every event as JSON Lines in a file of its own, whatever the output."""
    path = getattr(args, "events", None)
    if not path:
        return []
    from hangwatch.reporters.jsonl import JsonReporter

    class EventsFile(JsonReporter):
        def close(self) -> None:
            self.out.close()

    try:
        return [EventsFile(open(path, "w", encoding="utf-8"))]
    except OSError as exc:
        raise HangwatchError(f"--events: cannot write {path}: {exc.strerror or exc}") from None


def snapshot_options(args: argparse.Namespace, paths: Sequence[Path],
                     known_tree: Sequence[int] = ()) -> Any:
    from hangwatch.collectors.snapshot import SnapshotOptions

    return SnapshotOptions(pids=tuple(args.pid), match=args.match, log_paths=tuple(paths),
                           stacks=args.stacks, native=args.native, known_tree=tuple(known_tree))


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from hangwatch.sources.follow import FollowerGroup

    rules = load_rule_set(args.rules)
    paths = [Path(p) for p in args.logs]
    sources = [str(p) for p in paths]
    name = alerting.default_name(args, sources)
    history, keep = history_for(args, name, err)
    engine = engine_for(rules, args, history)
    collect = None
    if args.snapshot:
        collect = evidence_collector(rules, lambda: snapshot_options(args, paths))
    telling = alerting.start(args, name=name, logs=sources,
                             err=err)
    options = SessionOptions(report_dir=Path(args.report_dir), exit_on_stall=args.exit_on_stall,
                             announce=not args.json,
                             refresh_s=LIVE_REFRESH_S if is_live(args, out) else None,
                             turn_s=telling.turn_s, summarize_catch_up=summarized(args))
    preview = None
    if len(sources) == 1:  # one log: its end tells where the job is before all is read
        preview, running = preview_within(sources[0], lambda before: engine_for(
            rules, args, lines_before=before, prefilter=engine.prefilter))  # shared, as serve's
        if running:  # it may still scan with the shared prefilter: the watch takes its own
            engine = engine_for(rules, args, history)
    session = Session(engine, [*make_reporters(args, out), *telling.reporters, *keep], options,
                      sources, collect=collect, on_turn=telling.on_turn, preview=preview)
    group = FollowerGroup(paths, out=session.queue, poll=args.poll)
    session.watched = group.followers
    group.start()
    try:
        with _interruptible():
            return session.run()
    except KeyboardInterrupt:
        return ExitStatus.OK  # Ctrl-C is how a live watch ends
    finally:
        group.stop()
        session.close()
        telling.close(err)


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """Ctrl-C, or `kill -INT`, ends the watch also when it was started with SIGINT ignored
    (a script's background job, some CI runners): Python leaves an inherited SIG_IGN as it
    is, and the watch would then only die by SIGTERM, its alerts and report unfinished."""
    if threading.current_thread() is not threading.main_thread():
        yield  # called in a thread (embedded): signals are the caller's
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
