"""`hangwatch demo`: a real child process hangs in weight sync; watch hangwatch catch it."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from hangwatch.commands.watch import make_reporters, snapshot_options
from hangwatch.errors import ExitStatus, HangwatchError
from hangwatch.packs.load import load_rule_set
from hangwatch.session.engines import engine_for, prefilter_for
from hangwatch.session.evidence import evidence_collector
from hangwatch.session.session import Session, SessionOptions

END_WAIT_S = 5.0


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from hangwatch.sources.follow import Follower

    workdir = Path(tempfile.mkdtemp(prefix="hangwatch-demo-"))
    log = workdir / "train.log"
    rules = load_rule_set()
    prefilter = prefilter_for(rules)
    if prefilter is not None:
        prefilter.warm()  # ready before the job's first line, whatever the cache holds
    engine = engine_for(rules, args, prefilter=prefilter)  # its clock starts after that
    print(f"demo: starting a GKD-style job that writes {log} and hangs in weight sync; "
          f"stall threshold {args.stall:g}s", file=out, flush=True)
    child = subprocess.Popen([sys.executable, "-m", "hangwatch.jobs.demo_job", str(log)],
                             stdin=subprocess.DEVNULL, start_new_session=True)
    watch_args = argparse.Namespace(json=False, plain=args.plain, pid=[child.pid], match=None,
                                    stacks=True, native=False)
    session = Session(
        engine,
        make_reporters(watch_args, out),
        SessionOptions(report_dir=Path(args.report_dir), exit_on_stall=True,
                       refresh_s=None if args.plain or not out.isatty() else 1.0),
        [str(log)],
        collect=evidence_collector(rules, lambda: snapshot_options(watch_args, [log])),
    )
    follower = Follower(log, session.queue)
    session.watched = [follower]
    follower.start()
    try:
        status = session.run(should_stop=lambda: child.poll() is not None)
    finally:
        follower.stop()
        session.close()
        _end(child)
    if status != ExitStatus.STALL:
        raise HangwatchError(f"demo job ended before it hung (exit {child.returncode})")
    report = session.incidents[-1].report if session.incidents else None
    print(f"demo: hangwatch caught the hang and ended the job; report: {report}", file=out)
    return ExitStatus.OK


def _end(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is not None:
        return
    child.terminate()
    try:
        child.wait(END_WAIT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
