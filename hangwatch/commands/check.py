"""`hangwatch check LOG`: read a finished or killed log once and give the verdict."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from hangwatch.core.durations import format_duration
from hangwatch.core.engine import Engine
from hangwatch.core.lines import LineSplitter
from hangwatch.errors import ExitStatus, HangwatchError
from hangwatch.escape.terminal import safe
from hangwatch.packs.load import load_rule_set
from hangwatch.reporters.base import wait_lines, where_text
from hangwatch.reporters.progress import StderrBar
from hangwatch.reporters.ranks import COLUMNS, grouped, stall_lines
from hangwatch.session.engines import engine_for

READ_SIZE = 1 << 20


def read_log(engine: Engine, path: Path,
             progress: Callable[[int, int], None] | None = None) -> float:
    """Feed the whole file to the engine; return its mtime. `progress(read, size)` is
    called after each block."""
    try:
        with path.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            splitter = LineSplitter()
            while chunk := fh.read(READ_SIZE):
                engine.feed_block(str(path), splitter.push(chunk))
                if progress is not None:
                    progress(fh.tell(), size)
            engine.feed_block(str(path), splitter.flush())
            mtime = path.stat().st_mtime
    except OSError as exc:
        raise HangwatchError(f"cannot read {path}: {exc.strerror or exc}") from None
    # Each file's own last write tells which rank went quiet first.
    engine.backdate_source(str(path), max(0.0, engine.clock.wall() - mtime))
    return mtime


def read_with_bar(engine: Engine, path: Path, err: TextIO) -> float:
    """`read_log`, with a progress bar on stderr when it is a terminal."""
    if not StderrBar.wanted(err):
        return read_log(engine, path)
    bar = StderrBar(err, path.name, time.monotonic)
    try:
        return read_log(engine, path, bar.update)
    finally:
        bar.close()


def verdict(engine: Engine, quiet_s: float) -> str:
    """finished: a finish line came last; stalled: an error signal, or quiet past the
    threshold; running: written within the threshold."""
    if engine.finished is not None:
        return "finished"
    if any(r.last.severity == "error" for r in engine.signals.values()):
        return "stalled"
    return "running" if quiet_s < engine.threshold() else "stalled"


def result(engine: Engine, quiet_s: float) -> dict[str, Any]:
    state = engine.state()
    outcome = verdict(engine, quiet_s)
    diagnosis = engine.diagnosis()
    advice = diagnosis.advice if outcome == "stalled" else ()
    return {
        "verdict": outcome,
        "phase": state["phase"],
        "phase_title": state["phase_title"],
        "step": state["step"],
        "step_title": state["step_title"],
        "last_step": state["last_step"],
        "marker": state["marker"],
        "last_completed": state["last_completed"],
        "between": state["between"],
        "context": state["context"],
        "place": state["place"],
        "place_title": state["place_title"],
        "kind": state["kind"],
        "last_line": dict(zip(("source", "line", "text"), last, strict=True))
        if (last := engine.last_line()) else None,
        "quiet_s": round(quiet_s, 3),
        "threshold_s": state["threshold_s"],
        "threshold_from": state["threshold_from"],
        "waits": [dataclasses.asdict(w) for w in diagnosis.waits],
        "lines": state["lines"],
        "signals": state["signals"],
        "timeline": state["timeline"],
        "advice": [{"text": a.text, "because": a.because} for a in advice],
        "ranks": [row.to_dict() for row in diagnosis.ranks],
        "laggards": [dataclasses.asdict(lag) for lag in diagnosis.laggards],
        "laggards_more": diagnosis.laggards_more,
        "rank_summary": diagnosis.rank_summary,
        "desync": diagnosis.desync,
    }


def render(data: dict[str, Any], out: TextIO) -> None:
    lines = sum(data["lines"].values())
    head = {"finished": "FINISHED cleanly", "running": "RUNNING (written recently)",
            "stalled": "STALLED"}[data["verdict"]]
    print(f"verdict:        {head}", file=out)
    print(f"phase open:     {where_text(data) if data['phase'] else 'none'}", file=out)
    if data["place"]:
        print(safe(f"place:          {data['place_title']} [{data['place']}], by the last "
                   "lines"), file=out)
    if data["kind"]:
        print(f"kind of place:  {data['kind']}", file=out)
    if not data["phase"] and data["last_line"]:
        last = data["last_line"]
        print(safe(f"last line:      {last['source']}:{last['line']}: {last['text']}"), file=out)
    if data["marker"]:
        print(safe(f"named by:       {data['marker']}"), file=out)
    if data["context"]:
        print(safe(f"context:        {data['context']}"), file=out)
    print(f"last completed: {data['last_completed'] or 'none'}", file=out)
    if data["between"]:
        print(safe(f"between:        {data['between']}"), file=out)
    print(f"quiet for:      {format_duration(data['quiet_s'])} (threshold "
          f"{format_duration(data['threshold_s'])}, {data['threshold_from']}), "
          f"{lines} lines read", file=out)
    for line in wait_lines(data["waits"])[:3]:
        print(safe(f"repeating:      {line}"), file=out)
    if data["timeline"]:
        print("\ntimeline:", file=out)
        for entry in data["timeline"]:
            took = entry["duration_s"]
            took_text = format_duration(took) if took is not None else "-"
            title = f"  {entry['title']}" if entry.get("parent") else entry["title"]
            print(f"  {title:<32} {entry['state']:<10} line {entry['line']:<8} "
                  f"{took_text}", file=out)
    table = grouped(data["ranks"])
    if table or data["rank_summary"] or data["desync"]:
        print("\nranks:", file=out)
        for line in stall_lines(data):
            print(safe(f"  {line}"), file=out)
        widths = [max([12, *(len(row[i]) for row in table)]) for i in range(len(COLUMNS))]
        for row in ([COLUMNS] if table else []) + table:
            print(safe("  " + "  ".join(f"{c:<{w}}" for c, w in zip(row, widths, strict=True))
                       .rstrip()), file=out)
    if data["signals"]:
        print("\nsignals:", file=out)
        for s in data["signals"]:
            during = f", {s['context']}" if s.get("context") else ""
            kind = f" [{s['kind']}]" if s.get("kind") else ""
            print(safe(f"  {s['severity']:<8} {s['id']}{kind} x{s['count']} (last {s['source']}:"
                       f"{s['line']}{during}): {s['text'].strip()[:160]}"), file=out)
    if data["advice"]:
        print("\nadvice:", file=out)
        for a in data["advice"]:
            print(f"  * {safe(a['text'])}\n    because {safe(a['because'])}", file=out)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    engine = engine_for(load_rule_set(args.rules), args)
    paths = [Path(p) for p in args.logs]
    for path in paths:
        if not path.is_file():
            raise HangwatchError(f"no such log file: {path}")
    newest = max(read_with_bar(engine, p, err) for p in paths)
    quiet = max(0.0, engine.clock.wall() - newest)
    engine.backdate(quiet)
    data = result(engine, quiet)
    if args.json:
        out.write(json.dumps(data, ensure_ascii=False) + "\n")
    else:
        render(data, out)
    return ExitStatus.STALL if data["verdict"] == "stalled" else ExitStatus.OK
