"""`hangwatch run -- CMD`: a CI gate. Run the job, watch its output as it is written, and on a
stall gather the evidence, end every process of the job and exit 3; otherwise exit as the job
did.

The job is just another producer for the watch loop: its output lines go on the session's
queue as `Block`s named after the log file, so line numbers in reports are the log's.
"""

from __future__ import annotations

import argparse
import os
import queue
import signal
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from hangwatch.commands import alerting
from hangwatch.commands.watch import (
    events_reporters,
    history_for,
    snapshot_options,
)
from hangwatch.core.durations import format_duration
from hangwatch.core.events import Incident
from hangwatch.errors import ExitStatus
from hangwatch.jobs.job import Job, JobStartError, Terminal, adopt_orphans
from hangwatch.packs.load import load_rule_set
from hangwatch.reporters.base import Reporter
from hangwatch.session.engines import engine_for
from hangwatch.session.evidence import evidence_collector
from hangwatch.session.session import Session, SessionOptions
from hangwatch.sources.feed import Block, EndOfInput, Partial

FORWARDED = {signal.SIGINT: ExitStatus.INTERRUPTED, signal.SIGTERM: ExitStatus.TERMINATED}
STUCK_AFTER_S = 30.0  # past the grace and SIGKILL: a process in uninterruptible sleep


def command_argv(args: argparse.Namespace) -> list[str]:
    """argparse's REMAINDER keeps the `--` that separates our options from the command."""
    cmd = list(args.cmd)
    return cmd[1:] if cmd[:1] == ["--"] else cmd


class Producer:
    """Puts items on the session's queue from the job's threads, and stops waiting on a full
    queue once nobody consumes it (the stall was reported), so output keeps being echoed."""

    def __init__(self, target: queue.Queue[Any]) -> None:
        self.queue = target
        self.closed = threading.Event()

    def put(self, item: object) -> None:
        while not self.closed.is_set():
            try:
                self.queue.put(item, timeout=0.2)
                return
            except queue.Full:
                continue


class Interrupts:
    """Ctrl-C / SIGTERM: pass the signal to the job, give it `grace` to exit, then end it;
    a second signal ends it at once. Work happens off the handler, on a thread. Installed
    before the job starts, so that no signal can end hangwatch and leave the job running;
    one that comes while it starts is passed on by `attach`."""

    def __init__(self, grace: float) -> None:
        self.job: Job | None = None
        self.grace = grace
        self.received: int | None = None
        self._passed = False  # the first signal has been acted on
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signals reach only the main thread; an embedding caller keeps its own
        for sig in FORWARDED:
            self._previous[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def attach(self, job: Job) -> None:
        """The job has started: a signal that came while it was starting goes to it now."""
        self.job = job
        if self.received is not None and not self._passed:
            self._act(self._forward, job, self.received)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        first = self.received is None
        self.received = signum
        if self.job is not None:
            self._act(self._forward if first else self._kill, self.job, signum)

    def _act(self, target: Any, job: Job, signum: int) -> None:
        self._passed = True
        threading.Thread(target=target, args=(job, signum), name="hangwatch-run-signal",
                         daemon=True).start()

    def _forward(self, job: Job, signum: int) -> None:
        job.send(signum)
        if job.wait(self.grace) is None:
            job.stop(self.grace)

    @staticmethod
    def _kill(job: Job, signum: int) -> None:
        job.send(signal.SIGKILL)


def make_reporters(args: argparse.Namespace, err: TextIO) -> list[Reporter]:
    """hangwatch's own lines go to stderr, plain: the job's stdout stays the job's, and a live
    view would be torn by the job's output scrolling under it. `--events FILE` keeps a copy
    off the job's streams entirely."""
    if args.json:
        from hangwatch.reporters.jsonl import JsonReporter

        return [JsonReporter(err), *events_reporters(args)]
    from hangwatch.reporters.plain import PlainReporter

    return [PlainReporter(err), *events_reporters(args)]


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    argv = command_argv(args)
    terminal = Terminal(out, err)
    out, err = terminal.own("stdout"), terminal.own("stderr")
    rules = load_rule_set(args.rules)  # a bad rule file is reported before the job starts
    if args.doctor:
        from hangwatch.commands.doctor import gate

        refused = gate(args, err)
        if refused is not None:
            return refused
    log_path = Path(args.log)
    name = alerting.default_name(args, [str(log_path)], argv)
    history, keep = history_for(args, name, err)
    engine = engine_for(rules, args, history, live=True)  # the job's lines come as written
    job: Job | None = None
    # The job's tree is known exactly: the snapshot needs no discovery from the log.
    collect = evidence_collector(rules, lambda: snapshot_options(
        args, [], known_tree=job.known_pids() if job is not None else []))
    telling = alerting.start(args, name=name, logs=[str(log_path)], err=err)
    session = Session(engine, [*make_reporters(args, err), *telling.reporters, *keep],
                      SessionOptions(report_dir=Path(args.report_dir), exit_on_stall=True,
                                     turn_s=telling.turn_s),
                      [str(log_path)], collect=collect if args.snapshot else None,
                      on_turn=telling.on_turn)
    producer = Producer(session.queue)
    release_orphans = adopt_orphans()
    interrupts = Interrupts(args.grace)
    interrupts.install()
    try:
        job = Job.start(argv, log_path=log_path, echo=terminal.echo,
                        on_lines=lambda data: producer.put(Block(str(log_path), data)),
                        on_done=lambda: producer.put(EndOfInput()),
                        on_partial=lambda data: producer.put(Partial(str(log_path), data)),
                        leftover_grace=args.grace)
    except JobStartError as exc:
        interrupts.restore()
        release_orphans()
        session.close()
        telling.close(err)
        print(f"hangwatch: {exc}", file=err)
        return exc.exit_status
    interrupts.attach(job)
    started = time.monotonic()
    try:
        watched = session.run()
    finally:
        producer.closed.set()
        # A stall (or hangwatch itself failing) ends the job: none of it may outlive us.
        job.stop(args.grace)
        if job.wait(args.grace + STUCK_AFTER_S) is None:
            print("hangwatch: a process of the job did not exit even after SIGKILL (stuck in "
                  "the kernel?); giving up on it", file=err)
        interrupts.restore()
        release_orphans()
        session.close()
        telling.close(err)
    if job.stopped is not None:
        print(f"hangwatch: ended the job: SIGTERM to {job.stopped.terminated} process(es)"
              + (f", SIGKILL to {job.stopped.killed} still running after "
                 f"{format_duration(args.grace)}" if job.stopped.killed else ""), file=err)
    if job.log_error is not None:
        print(f"hangwatch: the log stopped being written: {job.log_error}", file=err)
    status = _status(watched, job, interrupts)
    incident = session.incidents[-1] if session.incidents else None
    _ci_outputs(args, argv, incident, status, time.monotonic() - started, out, err)
    return status


def _status(watched: int, job: Job, interrupts: Interrupts) -> int:
    if interrupts.received is not None:
        return FORWARDED[signal.Signals(interrupts.received)]
    if watched == ExitStatus.STALL:
        return ExitStatus.STALL
    status = job.wait(0)
    return ExitStatus.USAGE if status is None else status


def _ci_outputs(args: argparse.Namespace, argv: list[str], incident: Incident | None,
                status: int, duration_s: float, out: TextIO, err: TextIO) -> None:
    if incident is not None and os.environ.get("GITHUB_ACTIONS") == "true":
        from hangwatch.reporters import github

        github.report(incident, out=out, summary_path=os.environ.get("GITHUB_STEP_SUMMARY"))
    if args.junit:
        from hangwatch.reporters import junit

        try:
            junit.write_junit(Path(args.junit), command=argv, incident=incident,
                              exit_status=status, duration_s=duration_s,
                              log_path=Path(args.log))
        except OSError as exc:  # the job's verdict stands; the exit status still says it
            print(f"hangwatch: cannot write {args.junit}: {exc.strerror or exc}", file=err)
