"""Command line: parse arguments, pick the subcommand, turn errors into exit statuses.

Subcommand modules are imported only when chosen, so `hangwatch --help` stays fast.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from hangwatch import __version__
from hangwatch.commands.doctor import add_options as doctor_options
from hangwatch.core.durations import parse_duration
from hangwatch.errors import ExitStatus, HangwatchError

SUBCOMMANDS = ("watch", "check", "demo", "rules", "snapshot", "run", "serve", "doctor",
               "alert-test", "merge")
DEFAULT_STALL = "10m"
REPORT_DIR = "hangwatch-reports"
# Options shared by commands say the same everywhere.
NAME_HELP = ("the watch's name in alerts, metrics and state files (default: main for serve, "
             "the command's name for run, the first log's name for watch)")
STATE_DIR_HELP = ("kept across restarts: undelivered alerts, and for serve each watch's "
                  "offsets, phases and episodes (default: the user cache folder)")
CONFIG_HELP = "a service config file (YAML); alert-test sends to its `alerts:` targets"
RULES_HELP = ("extra rule pack file or folder (repeatable); a phase with an existing id "
              "overrides the built-in one")


def duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def phase_stall(text: str) -> tuple[str, float]:
    phase, sep, value = text.partition("=")
    if not sep or not phase:
        raise argparse.ArgumentTypeError(f"expected PHASE=DURATION, not {text!r}")
    return phase.strip(), duration(value)


def _settle_stall(args: argparse.Namespace) -> None:
    """`--stall` not given: the default, which packs' stall_after may raise."""
    if getattr(args, "stall", 0) is None:
        args.stall = duration(DEFAULT_STALL)
        args.stall_given = False
    else:
        args.stall_given = hasattr(args, "stall")


def _rules_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument("--rules", action="append", default=[], metavar="PATH",
                        help=RULES_HELP)


def _stall_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup,
                  default: str | None = None) -> None:
    """`--stall`; without a default of its own, an absent flag leaves the packs'
    stall_after in force (see `_settle_stall`)."""
    if default is not None:
        parser.add_argument("--stall", type=duration, default=duration(default),
                            metavar="DURATION",
                            help=f"no progress for this long is a stall (default {default})")
        return
    parser.add_argument("--stall", type=duration, default=None, metavar="DURATION",
                        help="no progress for this long is a stall; given, it outranks the "
                             "packs' stall_after (default 10m, or the phase's stall_after; "
                             "e.g. 90, 90s, 10m, 1h)")
    parser.add_argument("--phase-stall", type=phase_stall, action="append", default=[],
                        metavar="PHASE=DURATION",
                        help="the threshold for one phase or step (repeatable); outranks "
                             "--stall")


def _report_dir_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup,
                       default: str | None = REPORT_DIR) -> None:
    parser.add_argument("--report-dir", default=default, metavar="DIR",
                        help=f"where incident reports go (default ./{default})" if default
                        else "also write the snapshot into a new folder under DIR")


def _rule_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    _rules_option(parser)
    _stall_option(parser)


def _snapshot_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument("--pid", action="append", type=int, default=[], metavar="PID",
                        help="the job's processes (repeatable); default: find the log's writers")
    parser.add_argument("--match", metavar="REGEX",
                        help="also snapshot processes whose command line matches")
    parser.add_argument("--no-stacks", dest="stacks", action="store_false",
                        help="skip py-spy stack dumps")
    parser.add_argument("--native", action="store_true", help="py-spy --native stacks")


def _watch_options(parser: argparse.ArgumentParser) -> None:
    _rule_options(parser)
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="JSON Lines, one per event")
    out.add_argument("--plain", action="store_true",
                     help="plain timestamped lines even on a terminal")
    out.add_argument("--events", metavar="FILE",
                     help="also write every event as JSON Lines to FILE (created or emptied; "
                          "/dev/fd/N for an inherited descriptor)")
    _report_dir_option(out)
    out.add_argument("--history", metavar="FILE",
                     help="learn each phase's usual duration per job (--name) in FILE across "
                          "runs; say `slow` when one runs past 3x its usual")
    snap = parser.add_argument_group("snapshots on a stall")
    _snapshot_options(snap)
    snap.add_argument("--no-snapshot", dest="snapshot", action="store_false",
                      help="do not collect GPU/process/stack evidence")
    tell = parser.add_argument_group("alerts and metrics")
    tell.add_argument("--name", metavar="NAME", help=NAME_HELP)
    _alert_target_options(tell)
    tell.add_argument("--state-dir", metavar="DIR", help=STATE_DIR_HELP)
    tell.add_argument("--metrics", metavar="[HOST:]PORT",
                      help="serve Prometheus /metrics and /healthz (host defaults to 127.0.0.1)")


def _alert_target_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument("--webhook", action="append", default=[], metavar="URL",
                        help="POST each alert as JSON to URL (repeatable; Slack-compatible)")
    parser.add_argument("--alertmanager", action="append", default=[], metavar="URL",
                        help="send alerts to the Alertmanager at URL (repeatable)")
    parser.add_argument("--alert-exec", action="append", default=[], metavar="'CMD ARGS'",
                        help="run a command per alert, the alert as JSON on stdin and in "
                             "HANGWATCH_* variables; never through a shell (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hangwatch",
        description="Watch a training job's log; on a stall say where it hung, why, and what "
                    "to do.  `hangwatch LOG` is short for `hangwatch watch LOG`.",
        epilog="exit status: 0 ok, 1 a doctor check failed, 2 usage or rule error, 3 stall "
               "detected, 130 interrupted, 141 the reader of our output went away; `run` "
               "otherwise passes the job's own status through",
    )
    parser.add_argument("--version", action="version", version=f"hangwatch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND",
                                help="what to do (`hangwatch LOG` is `hangwatch watch LOG`)")

    watch = sub.add_parser("watch", help="follow logs live and report stalls (the default)")
    watch.add_argument("logs", nargs="+", metavar="LOG", help="log file(s); may not exist yet")
    watch.add_argument("--poll", action="store_true",
                       help="poll the files instead of using inotify notifications")
    _watch_options(watch)
    watch.add_argument("--exit-on-stall", action="store_true",
                       help="exit 3 after reporting the first stall")

    check = sub.add_parser("check", help="read a finished or killed log once: timeline, "
                                         "verdict, advice (exit 3 when stalled)")
    check.add_argument("logs", nargs="+", metavar="LOG", help="log file(s) to read")
    check.add_argument("--json", action="store_true", help="one JSON object")
    _rule_options(check)

    demo = sub.add_parser("demo", help="run a small job that hangs in weight sync, and watch it")
    _stall_option(demo, "5s")
    _report_dir_option(demo)
    demo.add_argument("--plain", action="store_true",
                      help="plain timestamped lines even on a terminal")

    rules = sub.add_parser("rules", help="list, show, lint and test rule packs")
    rules_sub = rules.add_subparsers(dest="rules_command", metavar="ACTION", required=True,
                                     help="what to do with rule packs")
    rules_list = rules_sub.add_parser("list", help="packs with their rule counts")
    rules_show = rules_sub.add_parser("show", help="a pack's effective rules")
    rules_show.add_argument("pack", help="the pack's name, as `rules list` gives it")
    rules_lint = rules_sub.add_parser("lint", help="validate rule files (exit 2 on errors)")
    rules_lint.add_argument("files", nargs="+", metavar="FILE",
                            help="rule pack file(s) or folder(s)")
    rules_test = rules_sub.add_parser("test", help="which rule each line of a log hits")
    rules_test.add_argument("log", metavar="LOG", help="the log to try the rules on")
    rules_test.add_argument("--show", default="", metavar="WHICH",
                            help="lines to explain one by one: matched, unmatched, all, a line "
                                 "N or a range N-M / N- (comma-separated; default: only the "
                                 "summary)")
    for p in (rules_list, rules_show, rules_test):
        _rules_option(p)
    for p in (rules_list, rules_show, rules_lint, rules_test):
        p.add_argument("--json", action="store_true", help="one JSON object")

    snapshot = sub.add_parser("snapshot", help="collect GPU, process, stack and system "
                                               "evidence now")
    _snapshot_options(snapshot)
    snapshot.add_argument("--log", action="append", default=[], metavar="PATH",
                          help="find the processes writing this log (repeatable)")
    snapshot.add_argument("--json", action="store_true", help="the snapshot as one JSON object")
    _report_dir_option(snapshot, default=None)

    run = sub.add_parser("run", help="run a command as a CI gate: exit 3 when it stalls",
                         usage="hangwatch run [options] [--log FILE] -- CMD [ARGS...]")
    run.add_argument("--log", default="hangwatch-run.log", metavar="FILE",
                     help="where the job's output is written (default hangwatch-run.log)")
    run.add_argument("--grace", type=duration, default=duration("10s"), metavar="DURATION",
                     help="after SIGTERM, wait this long before SIGKILL (default 10s)")
    run.add_argument("--junit", metavar="FILE", help="write a JUnit XML result")
    run.add_argument("--doctor", action="store_true", help="run `hangwatch doctor` first; "
                     "on a failed check do not start the job and exit 1")
    _watch_options(run)
    run.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD",
                     help="the command to run, after `--`")
    _serve_parser(sub)
    doctor = sub.add_parser("doctor", help="preflight: find what would hang a job before it "
                                           "starts (exit 1 when a check fails)")
    doctor_options(doctor, duration, _rules_option)

    merge = sub.add_parser("merge", help="take the stack groups of several nodes' incident "
                                         "reports together: who stands where, by node and rank")
    merge.add_argument("reports", nargs="+", metavar="REPORT_DIR",
                       help="an incident report folder (holding report.json) of each node, "
                            "e.g. on a shared filesystem")
    merge.add_argument("--json", action="store_true",
                       help="one JSON object (report.json's stack_groups and suspects shapes) "
                            "instead of Markdown")
    _rules_option(merge)

    alert_test = sub.add_parser("alert-test", help="send a sample alert to check the pipe")
    _alert_target_options(alert_test)
    alert_test.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    alert_test.add_argument("--json", action="store_true", help="one JSON object per target")
    return parser


def _serve_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser(
        "serve", help="run as a service: watches from a config file, systemd notify and "
                      "watchdog, state kept across restarts, SIGHUP reloads",
        usage="hangwatch serve --config FILE [--json] | --check-config FILE | "
              "[options] LOG...")
    serve.add_argument("logs", nargs="*", metavar="LOG",
                       help="without --config: one watch of these logs (paths or globs)")
    serve.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    serve.add_argument("--check-config", metavar="FILE",
                       help="validate FILE and the rules it names, then exit (2 on errors)")
    serve.add_argument("--json", action="store_true",
                       help="JSON Lines on stdout, one per event, each with a `watch` key")
    serve.add_argument("--poll", action="store_true",
                       help="poll the files instead of using inotify notifications")
    one = serve.add_argument_group("one watch from flags (without --config)")
    one.add_argument("--name", default="main", help=NAME_HELP)
    one.add_argument("--state-dir", metavar="DIR", help=STATE_DIR_HELP)
    _alert_target_options(one)
    one.add_argument("--metrics", metavar="[HOST:]PORT",
                     help="serve Prometheus /metrics and /healthz (host defaults to 127.0.0.1)")
    _rule_options(one)
    _report_dir_option(one)
    _snapshot_options(one)
    one.add_argument("--no-snapshot", dest="snapshot", action="store_false",
                     help="do not collect GPU/process/stack evidence")


def _with_default_command(argv: list[str]) -> list[str]:
    """`hangwatch LOG` means `hangwatch watch LOG`."""
    first = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
    if not argv or argv[0] in ("-h", "--help", "--version"):
        return argv
    if first is None or argv[first] not in SUBCOMMANDS:
        return ["watch", *argv]
    return argv


def mistyped_command(argv: Sequence[str]) -> str | None:
    """The command meant by a first argument that is no command and no existing file, but is
    close to a command's name (`chek`): watching it would wait forever for a file of that
    name. A name with a dot or a slash is taken for a log that may not exist yet."""
    word = argv[0] if argv else ""
    if not word or word in SUBCOMMANDS or any(c in word for c in "./-") or os.path.exists(word):
        return None
    close = difflib.get_close_matches(word, SUBCOMMANDS, n=1, cutoff=0.6)
    return close[0] if close else None


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    args_list = list(sys.argv[1:] if argv is None else argv)
    meant = mistyped_command(args_list)
    if meant is not None:
        print(f"hangwatch: {args_list[0]!r} is neither a command nor an existing file; "
              f"did you mean `{meant}`?", file=err)
        return ExitStatus.USAGE
    parser = build_parser()
    try:
        args = parser.parse_args(_with_default_command(args_list))
    except SystemExit as exc:  # argparse: --help is 0, a usage error is 2
        return int(exc.code or 0)
    if args.command is None:
        parser.print_help(out)
        return ExitStatus.USAGE
    _settle_stall(args)
    try:
        module = importlib.import_module(f"hangwatch.commands.{args.command.replace('-', '_')}")
        status = int(module.run(args, out, err))
        out.flush()  # here, where a reader that went away is still ours to handle
        return status
    except HangwatchError as exc:
        print(f"hangwatch: {exc}", file=err)
        return int(exc.status)
    except KeyboardInterrupt:
        return int(ExitStatus.INTERRUPTED)
    except BrokenPipeError:
        return _reader_gone(out, err)


def _reader_gone(*streams: TextIO) -> int:
    """The reader of our output went away (`| head`): stop quietly, with the status a shell
    gives `cat` or `grep` ended by SIGPIPE."""
    from hangwatch.storage.files import discard_output

    for stream in streams:
        discard_output(stream)
    return int(ExitStatus.READER_GONE)
