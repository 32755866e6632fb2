"""`hangwatch snapshot`: the evidence a stall would collect, taken now.

    hangwatch snapshot --log train.log          the processes writing train.log
    hangwatch snapshot --pid 4242 --json        one process and its children, as JSON
    hangwatch snapshot --match 'torchrun|ray::' by command line
    hangwatch snapshot --log train.log --report-dir hangwatch-reports   also kept in a folder
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from hangwatch.collectors.snapshot import (
    SnapshotOptions,
    collection_notes,
    key_findings,
    take_snapshot,
)
from hangwatch.core.evidence import process_label
from hangwatch.errors import ExitStatus, HangwatchError
from hangwatch.escape.terminal import rich_text, safe, safe_lines
from hangwatch.reporters.snapshot_tables import (
    GPU_COLUMNS,
    GROUP_COLUMNS,
    PROCESS_COLUMNS,
    gpu_rows,
    group_rows,
    process_rows,
    system_lines,
)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.match:
        try:
            re.compile(args.match)
        except re.error as exc:
            err.write(f"hangwatch snapshot: --match {args.match!r} is not a valid regular "
                      f"expression: {exc}\n")
            return ExitStatus.USAGE
    from hangwatch.packs.load import load_rule_set

    options = SnapshotOptions(pids=tuple(args.pid), match=args.match,
                              log_paths=tuple(Path(p) for p in args.log),
                              stacks=args.stacks, native=args.native,
                              stack_rules=load_rule_set().stack_rules)
    snapshot = take_snapshot(options)
    folder = _keep(snapshot, args.report_dir, err) if args.report_dir else None
    if args.json:
        out.write(json.dumps(snapshot, indent=2, default=str) + "\n")
    else:
        # Off a terminal rich assumes 80 columns, too narrow for the process table.
        width = None if out.isatty() else 120
        render(snapshot, _Console(file=out, highlight=False, width=width))
    if folder is not None:
        err.write(f"hangwatch: snapshot written to {folder}\n")
    return ExitStatus.USAGE if args.report_dir and folder is None else ExitStatus.OK


def _keep(snapshot: dict[str, Any], report_dir: str, err: TextIO) -> Path | None:
    from hangwatch.reporters.incident import write_snapshot

    try:
        return write_snapshot(Path(report_dir).absolute(), snapshot)
    except (OSError, HangwatchError) as exc:  # the snapshot is still shown; the status says it
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        err.write(f"hangwatch: cannot write the snapshot under {report_dir}: {reason}\n")
        return None


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """rich would exit 1 here; a closed pipe ends every command alike (cli.py)."""
        self.quiet = True
        raise BrokenPipeError


def render(snapshot: dict[str, Any], console: Console) -> None:
    console.print("[bold]Key findings[/]")
    findings = key_findings(snapshot)
    for line in findings:
        console.print(f"  • {safe(line)}", markup=False)
    if snapshot.get("stack_groups"):
        console.print("[bold]Where the processes are[/]")
        if snapshot.get("stack_summary"):
            console.print(f"  {safe(snapshot['stack_summary'])}", markup=False)
        console.print(_table("Stack groups", GROUP_COLUMNS, group_rows(snapshot)))
    # The command line goes with each stack below: a table column would fold it unreadably.
    columns = [c for c in PROCESS_COLUMNS if c != "command"]
    rows = [row[:len(columns)] for row in process_rows(snapshot)]
    if rows:
        console.print(_table("Processes", columns, rows))
    if snapshot.get("gpus"):
        console.print(_table("GPUs (* = a process of the job)", GPU_COLUMNS,
                             gpu_rows(snapshot)))
    console.print("[bold]System[/]")
    for line in system_lines(snapshot.get("system", {})):
        console.print(f"  {safe(line)}", markup=False)
    for p in snapshot.get("processes", []):
        if p.get("stack"):
            console.print(rich_text(process_label(p), "bold") + Text(": "), end="")
            console.print(safe(" ".join(p.get("cmdline") or [])), markup=False)
            console.print(safe_lines(p["stack"]), markup=False)
    notes = collection_notes(snapshot, shown=findings)
    if notes:
        console.print("\n[bold]Notes[/]")
        for note in notes:
            console.print(f"  {safe(note)}", markup=False)


def _table(title: str, columns: Any, rows: list[tuple[str, ...]]) -> Table:
    table = Table(title=title, title_justify="left", title_style="bold")
    for column in columns:
        table.add_column(column, overflow="fold", no_wrap=column != "name")
    for row in rows:
        table.add_row(*(rich_text(cell) for cell in row))
    return table
