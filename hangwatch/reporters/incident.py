"""The incident report: one folder per stall that a person can read, paste into an issue, or
feed to a tool.

    <report_dir>/<UTC time>-<phase>/report.json  everything, machine-readable
                                    report.md    the summary a person reads first
                                    stacks.txt   every Python stack
                                    log-tail.txt the log's last lines

Files are written to a temporary name and renamed, so a reader never sees half a report; they
are private to the user (0600 in a 0700 folder) since stacks and environments say a lot, and
never written through a link planted ahead of them (`hangwatch.files`). Every string passes
through the redactor on its way out, and text from outside is escaped for each file's format
(`hangwatch.escape`): it cannot break out of report.md's code blocks and tables, and the text
files carry no terminal control sequences.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hangwatch.core.durations import format_duration
from hangwatch.core.events import Advice, StallEvent
from hangwatch.core.evidence import process_label
from hangwatch.escape import jsontext, markdown
from hangwatch.escape.redact import redact_text, redact_tree
from hangwatch.escape.terminal import visible, visible_lines
from hangwatch.files import new_private_dir, open_report_dir, write_private
from hangwatch.snapshot import (
    GPU_COLUMNS,
    PROCESS_COLUMNS,
    collection_notes,
    gpu_rows,
    key_findings,
    process_rows,
    system_lines,
)

MD_LOG_LINES = 40  # the report's own excerpt; log-tail.txt has every line given
MD_TIMELINE_ROWS = 30  # a training loop repeats its phases; report.json keeps them all


def write_incident(report_dir: Path, *, stall: StallEvent, timeline: Sequence[dict[str, Any]],
                   log_tail: Sequence[str], sources: Sequence[str],
                   snapshot: dict[str, Any] | None, advice: Sequence[Advice]) -> Path:
    """Write the four files into a new folder under `report_dir`; return that folder."""
    snap = snapshot or {}
    report: dict[str, Any] = redact_tree({
        "stall": dataclasses.asdict(stall),
        "timeline": [dict(entry) for entry in timeline],
        "gpus": snap.get("gpus", []),
        "processes": snap.get("processes", []),
        "system": snap.get("system", {}),
        "advice": [{"text": a.text, "because": a.because} for a in advice],
        "sources": list(sources),
        "discovery": snap.get("discovery", {}),
        "nvml": snap.get("nvml"),
        "key_findings": key_findings(snap) if snapshot is not None else [],
        "taken_at": snap.get("taken_at"),
        "errors": snap.get("errors", []),
    })
    tail = [redact_text(line.rstrip("\n")) for line in log_tail]
    files = {
        "report.json": jsontext.dumps(report, indent=2) + "\n",
        "report.md": render_markdown(report, tail, snapshot is not None),
        "stacks.txt": visible_lines(render_stacks(report["processes"])),
        "log-tail.txt": "".join(visible(line) + "\n" for line in tail),
    }
    with open_report_dir(report_dir) as parent:
        name = _new_folder(parent, report_dir, stall, files)
    return report_dir / name


def _new_folder(parent: int, report_dir: Path, stall: StallEvent, files: dict[str, str]) -> str:
    """Make a new private folder for the stall and write `files` into it; return its name. A
    name already taken (by an earlier stall, or by a link someone planted) is skipped."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(stall.wall))
    phase = re.sub(r"[^A-Za-z0-9_.-]+", "_", stall.phase or "unknown")
    for n in range(1, 1000):
        name = f"{stamp}-{phase}" + (f"-{n}" if n > 1 else "")
        try:
            with new_private_dir(parent, name) as folder:
                for file, text in files.items():
                    write_private(folder, file, text.encode("utf-8"))
            return name
        except FileExistsError:
            continue
    raise FileExistsError(f"too many incident folders named {stamp}-{phase} in {report_dir}")


# --- rendering ---------------------------------------------------------------------------------

def render_stacks(processes: Sequence[dict[str, Any]]) -> str:
    parts = []
    for p in processes:
        header = f"== {process_label(p)}: {' '.join(p.get('cmdline') or [])}".rstrip()
        body = p.get("stack") or f"(no stack: {p.get('stack_error', 'unknown')})"
        parts.append(f"{header}\n{body}\n")
    return "\n".join(parts) if parts else "(no process of the job found)\n"


def render_markdown(report: dict[str, Any], tail: Sequence[str], snapshot_taken: bool) -> str:
    stall = report["stall"]
    phase = stall.get("phase")
    title = stall.get("phase_title") or phase
    where = f"{markdown.authored(title)} ({markdown.code(phase)})" if phase else "no known phase"
    out = [f"# Stall: {where}", ""]
    step = stall.get("step")
    last = markdown.authored(stall.get("last_completed") or "none")
    out += [f"- **No progress for:** {format_duration(stall['idle_s'])} "
            f"(threshold {format_duration(stall['threshold_s'])})",
            *([f"- **Step:** {markdown.inline(str(step))}"] if step is not None else []),
            f"- **Detected:** {_utc(stall['wall'])}",
            f"- **Last completed phase:** {last}",
            *_laggards_md(stall.get("laggards")),
            f"- **Sources:** {', '.join(markdown.code(s) for s in report['sources']) or 'none'}",
            ""]
    out += _section("Key findings", [f"- {markdown.inline(line)}"
                                     for line in report["key_findings"]]
                    or ["- (snapshots disabled)" if not snapshot_taken else "- none"])
    out += _section("Advice", [f"{i}. {markdown.authored(a['text'])}\n"
                               f"   - *because:* {markdown.inline(a['because'])}"
                               for i, a in enumerate(report["advice"], 1)] or ["none"])
    signals = stall.get("signals") or []
    if signals:
        out += _section("Signals seen", [
            f"- {markdown.code(s['id'])} ({s['severity']}) {markdown.inline(str(s['source']))}:"
            f"{s['line']}: {markdown.code(s['text'])}" for s in signals])
    out += _section("Timeline", _timeline_table(report["timeline"]))
    if snapshot_taken:
        out += _section("Processes", _table(PROCESS_COLUMNS, process_rows(report)))
        out += _section("Stacks", _stacks_md(report["processes"]))
        out += _section("GPUs", _gpus_md(report))
        out += _section("System", [f"- {markdown.inline(line)}"
                                   for line in system_lines(report["system"])]
                        or ["(not collected)"])
        notes = collection_notes(report, shown=report["key_findings"])
        if notes:
            out += _section("Collection notes", [f"- {markdown.inline(n)}" for n in notes])
    out += _section(f"Log tail (last {min(len(tail), MD_LOG_LINES)} lines)",
                    markdown.fence(tail[-MD_LOG_LINES:]))
    return "\n".join(out).rstrip() + "\n"


def _laggards_md(laggards: Any) -> list[str]:
    if not laggards:
        return []
    items = laggards if isinstance(laggards, list) else [laggards]
    return ["- **Laggards:** " + ", ".join(markdown.inline(str(item)) for item in items)]


def _section(title: str, body: Sequence[str]) -> list[str]:
    return [f"## {title}", "", *body, ""]


def _timeline_table(timeline: Sequence[dict[str, Any]]) -> list[str]:
    """The engine's timeline entries (hangwatch/core/phases.py), newest last."""
    if not timeline:
        return ["(no phase seen)"]
    shown = timeline[-MD_TIMELINE_ROWS:]
    rows = []
    for entry in shown:
        duration = entry.get("duration_s")
        started = entry.get("started_wall")
        rows.append((
            f"{markdown.cell(entry.get('title') or entry.get('phase'))} "
            f"({markdown.code_cell(str(entry.get('phase')))})",
            markdown.cell(entry.get("state", "")),
            _utc(started) if isinstance(started, (int, float)) else "",
            format_duration(duration) if isinstance(duration, (int, float)) else "",
            markdown.cell(f"{Path(str(entry.get('source', ''))).name}:{entry.get('line', '')}"),
        ))
    lines = _table(("phase", "state", "started (UTC)", "took", "where"), rows, escaped=True)
    if len(timeline) > len(shown):
        lines.append(f"\n({len(timeline) - len(shown)} earlier entries in report.json)")
    return lines


def _stacks_md(processes: Sequence[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for p in processes:
        label = markdown.inline(process_label(p))
        if p.get("stack"):
            lines += [f"### {label}", "", *markdown.fence(str(p["stack"]).splitlines()), ""]
        elif "not a Python process" not in (p.get("stack_error") or ""):
            lines.append(f"- {label}: no stack: {markdown.inline(str(p.get('stack_error')))}")
    return lines[:-1] if lines and lines[-1] == "" else lines or ["(no Python process)"]


def _gpus_md(report: dict[str, Any]) -> list[str]:
    nvml = report.get("nvml") or {}
    lines: list[str] = []
    if nvml.get("status") != "ok":
        lines += [f"NVML: **{markdown.inline(str(nvml.get('status', 'unknown')))}**: "
                  f"{markdown.inline(str(nvml.get('detail', '')))}"]
    if report["gpus"]:
        if lines:
            lines.append("")
        lines += [*_table(GPU_COLUMNS, gpu_rows(report)), "", "`*`: a process of the job"]
    return lines or ["(no GPU)"]


def _table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *,
           escaped: bool = False) -> list[str]:
    """A Markdown table; cells are escaped here unless the caller built them `escaped`."""
    if not rows:
        return ["(none)"]
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns),
            *("| " + " | ".join(c if escaped else markdown.cell(c) for c in row) + " |"
              for row in rows)]


def _utc(wall: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(wall))
