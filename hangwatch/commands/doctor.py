"""`hangwatch doctor`: the preflight, and `--compare` across nodes.

    hangwatch doctor                         every check, a table; exit 1 if one fails
    hangwatch doctor --json > $(hostname).json
    hangwatch doctor --compare node*.json    what differs between the nodes
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from hangwatch.core.durations import parse_duration
from hangwatch.errors import ExitStatus, HangwatchError

if TYPE_CHECKING:
    from hangwatch.doctor.runner import Report

DEFAULT_TIMEOUT = "15s"


def add_options(parser: argparse.ArgumentParser, duration: Callable[[str], float],
                rules_option: Callable[[argparse.ArgumentParser], None]) -> None:
    """doctor's options; `--rules` as every command has it (their `checks:` run too)."""
    parser.add_argument("--json", action="store_true",
                        help='one JSON object: {"checks": [...], "host": ..., "facts": {...}}')
    parser.add_argument("--data", action="extend", nargs="+", default=[], metavar="PATH",
                        help="data files or folders the job reads: must exist, be readable "
                             "and non-empty (parquet/jsonl/json are sniffed)")
    parser.add_argument("--disk", action="extend", nargs="+", default=[], metavar="DIR",
                        help="where logs, checkpoints and reports go (default: .)")
    parser.add_argument("--timeout", type=duration, default=duration(DEFAULT_TIMEOUT),
                        metavar="DURATION", help="the most the checks may take in all "
                                                 f"(default {DEFAULT_TIMEOUT})")
    parser.add_argument("--only", metavar="FAMILY[,FAMILY...]",
                        help="run only these families of checks (rendezvous, network, shm, "
                             "gpu, ray, data, clock, limits, disk, versions, packs)")
    rules_option(parser)
    parser.add_argument("--compare", nargs="+", metavar="FILE",
                        help="compare the --json output of several nodes instead")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.compare:
        return _compare([Path(p) for p in args.compare], args.json, out)
    from hangwatch.doctor.render import table
    from hangwatch.doctor.runner import FAMILIES

    families: tuple[str, ...] = FAMILIES
    if args.only:
        wanted = {f.strip() for f in args.only.split(",") if f.strip()}
        unknown = sorted(wanted - set(FAMILIES))
        families = tuple(f for f in FAMILIES if f in wanted)
        if unknown:
            raise HangwatchError(f"--only: no family {', '.join(unknown)} (known: "
                                 f"{', '.join(FAMILIES)})")
    report = preflight(args.rules, data=args.data, disk=args.disk or ["."],
                       timeout=args.timeout, families=families)
    if args.json:
        out.write(json.dumps(report.as_dict(), indent=2) + "\n")
    else:
        out.write("\n".join(table(report)) + "\n")
    return ExitStatus.CHECK_FAILED if report.failed else ExitStatus.OK


def preflight(rules: Sequence[str], *, data: Sequence[str] = (), disk: Sequence[str] = (),
              timeout: float, families: tuple[str, ...] | None = None) -> Report:
    """The checks on this machine, with the packs' own checks (a bad pack file raises)."""
    from hangwatch.doctor.model import Machine, Options
    from hangwatch.doctor.packs import load_pack_checks
    from hangwatch.doctor.runner import FAMILIES, run_doctor

    options = Options(data=tuple(Path(p) for p in data), disk=tuple(Path(p) for p in disk),
                      timeout=timeout, pack_checks=tuple(load_pack_checks(rules)))
    return run_doctor(Machine(env=dict(os.environ)), options, families or FAMILIES)


def gate(args: argparse.Namespace, err: TextIO) -> int | None:
    """`hangwatch run --doctor`: the preflight before the job, its table on stderr (the job's
    stdout stays the job's); ExitStatus.CHECK_FAILED when the job must not start."""
    from hangwatch.doctor.render import table

    folders = {str(Path(args.log).absolute().parent), str(Path(args.report_dir).absolute())}
    report = preflight(args.rules, disk=sorted(folders), timeout=parse_duration(DEFAULT_TIMEOUT))
    err.write("\n".join(table(report)) + "\n")
    if report.failed:
        err.write("hangwatch: a preflight check failed; the job was not started\n")
        return ExitStatus.CHECK_FAILED
    return None


def _compare(paths: list[Path], as_json: bool, out: TextIO) -> int:
    from hangwatch.doctor.compare import compare, load_nodes, render

    nodes = load_nodes(paths)
    differences = compare(nodes)
    if as_json:
        out.write(json.dumps({"nodes": [{"name": n.name, "file": n.file,
                                         "failed_checks": n.failed()} for n in nodes],
                              "differences": [d.as_dict() for d in differences]},
                             indent=2) + "\n")
    else:
        out.write("\n".join(render(nodes, differences)) + "\n")
    return ExitStatus.CHECK_FAILED if any(d.must_agree for d in differences) else ExitStatus.OK
