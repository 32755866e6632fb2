"""The incident report: one folder per stall that a person can read, paste into an issue, or
feed to a tool.

    <report_dir>/<UTC time>-<phase>/report.json  everything, machine-readable
                                    report.md    the summary a person reads first
                                    stacks.txt   every Python stack
                                    log-tail.txt the log's last lines
                                    flight-recorder/  the job's Flight Recorder dumps, and
                                                 torch's analysis of them (when enabled)

Files are written to a temporary name and renamed, so a reader never sees half a report; they
are private to the user (0600 in a 0700 folder) since stacks and environments say a lot.
Every string passes through the redactor on its way out.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hangwatch.collectors.redact import redact_text, redact_tree
from hangwatch.core.durations import format_duration
from hangwatch.core.events import Advice, StallEvent
from hangwatch.core.evidence import process_label
from hangwatch.files import write_atomic
from hangwatch.reporters.base import wait_lines, where_text
from hangwatch.reporters.ranks import COLUMNS, grouped, laggard_name, stall_lines
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
        "flight_recorder": snap.get("flight_recorder"),
    })
    folder = _new_folder(report_dir, stall.wall, stall.phase or "unknown")
    tail = [redact_text(line.rstrip("\n")) for line in log_tail]
    if report["flight_recorder"]:
        _copy_dumps(folder / "flight-recorder", report["flight_recorder"])
    _write(folder / "report.json", json.dumps(report, indent=2, default=str) + "\n")
    _write(folder / "report.md", render_markdown(report, tail, snapshot is not None))
    _write(folder / "stacks.txt", render_stacks(report["processes"]))
    _write(folder / "log-tail.txt", "".join(line + "\n" for line in tail))
    return folder


def write_snapshot(report_dir: Path, snapshot: dict[str, Any]) -> Path:
    """`hangwatch snapshot --report-dir`: the snapshot alone, redacted, in a folder of its own
    next to the incidents (<UTC time>-snapshot/snapshot.json and stacks.txt); that folder."""
    snap = redact_tree(snapshot)
    folder = _new_folder(report_dir, snap.get("taken_at") or time.time(), "snapshot")
    _write(folder / "snapshot.json", json.dumps(snap, indent=2, default=str) + "\n")
    _write(folder / "stacks.txt", render_stacks(snap.get("processes", [])))
    return folder


def _copy_dumps(folder: Path, recorder: dict[str, Any]) -> None:
    """The dumps as the job wrote them (for torch's analyzer elsewhere), and its analysis."""
    folder.mkdir(mode=0o700)
    for dump in recorder.get("dumps", []):
        with contextlib.suppress(OSError):  # gone, or unreadable: its summary says so
            target = folder / Path(dump["path"]).name
            shutil.copyfile(dump["path"], target)
            target.chmod(0o600)
            dump["copied_to"] = f"flight-recorder/{target.name}"
    analysis = recorder.get("analysis")
    if analysis:
        _write(folder / "analysis.txt", f"{analysis.get('tool', '')}\n"
                                         f"status: {analysis['status']}\n\n{analysis['output']}\n")


def _new_folder(report_dir: Path, wall: float, label: str) -> Path:
    if not report_dir.exists():
        report_dir.mkdir(parents=True, mode=0o700)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(wall))
    phase = re.sub(r"[^A-Za-z0-9_.-]+", "_", label)
    for n in range(1, 1000):
        folder = report_dir / (f"{stamp}-{phase}" + (f"-{n}" if n > 1 else ""))
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            continue
        folder.chmod(0o700)  # mkdir's mode is filtered by the umask
        return folder
    raise FileExistsError(f"too many incident folders named {stamp}-{phase} in {report_dir}")


def _write(path: Path, text: str) -> None:
    write_atomic(path, text.encode("utf-8"))


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
    out = [f"# Stall: {where_text(stall)}", ""]
    out += [f"- **No progress for:** {format_duration(stall['idle_s'])} "
            f"(threshold {format_duration(stall['threshold_s'])}, "
            f"{stall.get('threshold_from') or 'default'})",
            f"- **Detected:** {_utc(stall['wall'])}",
            f"- **Last completed phase:** {stall.get('last_completed') or 'none'}",
            *([f"- **Named by:** `{stall['marker']}`"] if stall.get("marker") else []),
            *([f"- **Usually:** {stall['usual']}"] if stall.get("usual") else []),
            *(f"- **Repeating:** {line}" for line in wait_lines(stall.get("waits") or [])),
            f"- **Sources:** {', '.join(f'`{s}`' for s in report['sources']) or 'none'}", ""]
    out += _section("Key findings", [f"- {line}" for line in report["key_findings"]]
                    or ["- (snapshots disabled)" if not snapshot_taken else "- none"])
    out += _section("Advice", _advice_md(report["advice"]) or ["none"])
    signals = stall.get("signals") or []
    if signals:
        out += _section("Signals seen", [
            f"- `{s['id']}` ({s['severity']}) {s['source']}:{s['line']}"
            f"{' ' + s['context'] if s.get('context') else ''}: `{s['text']}`" for s in signals])
    if stall.get("ranks") or stall.get("rank_summary") or stall.get("desync"):
        out += _section("Ranks", _ranks_md(stall, report["processes"]))
    if report.get("flight_recorder"):
        out += _section("Flight Recorder", _flight_md(report["flight_recorder"]))
    out += _section("Timeline", _timeline_table(report["timeline"]))
    if snapshot_taken:
        out += _section("Processes", _table(PROCESS_COLUMNS, process_rows(report)))
        out += _section("Stacks", _stacks_md(report["processes"]))
        out += _section("GPUs", _gpus_md(report))
        out += _section("System", [f"- {line}" for line in system_lines(report["system"])]
                        or ["(not collected)"])
        notes = collection_notes(report, shown=report["key_findings"])
        if notes:
            out += _section("Collection notes", [f"- {n}" for n in notes])
    out += _section(f"Log tail (last {min(len(tail), MD_LOG_LINES)} lines)",
                    ["```text", *tail[-MD_LOG_LINES:], "```"])
    return "\n".join(out).rstrip() + "\n"


def _advice_md(advice: Sequence[dict[str, str]]) -> list[str]:
    """Numbered advice; the evidence behind a run of advice is said once, after it."""
    lines: list[str] = []
    first = 1
    for i, item in enumerate(advice, 1):
        lines.append(f"{i}. {item['text']}")
        if i == len(advice) or advice[i]["because"] != item["because"]:
            which = f" ({first}-{i})" if i > first else ""
            lines.append(f"   - *because{which}:* {item['because']}")
            first = i + 1
    return lines


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
            f"{entry.get('title') or entry.get('phase')} (`{entry.get('phase')}`)",
            str(entry.get("state", "")),
            _utc(started) if isinstance(started, (int, float)) else "",
            format_duration(duration) if isinstance(duration, (int, float)) else "",
            f"{Path(str(entry.get('source', ''))).name}:{entry.get('line', '')}",
        ))
    lines = _table(("phase", "state", "started (UTC)", "took", "where"), rows)
    if len(timeline) > len(shown):
        lines.append(f"\n({len(timeline) - len(shown)} earlier entries in report.json)")
    return lines


def _ranks_md(stall: dict[str, Any], processes: Sequence[dict[str, Any]]) -> list[str]:
    """Who holds the job up, the ranks side by side, and each laggard's stack."""
    lines = [f"- {line}" for line in stall_lines(stall)]
    table = grouped(stall.get("ranks") or [])
    if table:
        lines += ["", *_table(COLUMNS, table), "", "`*`: a laggard"]
    for lag in stall.get("laggards") or []:
        if lag.get("rank") is None:
            continue
        mine = [p for p in processes if str(p.get("rank")) == str(lag["rank"])]
        lines += ["", f"### {laggard_name(lag)}: {lag['why']}", ""]
        if not mine:
            lines.append("(no process of this rank found on this machine: ranks are told "
                         "from `RANK`/`LOCAL_RANK` or `--rank N`)")
        for p in mine:
            body = p.get("stack") or f"(no stack: {p.get('stack_error', 'unknown')})"
            lines += [f"{process_label(p)}:", "", "```text", body, "```"]
    return lines


def _flight_md(recorder: dict[str, Any]) -> list[str]:
    lines = [f"- dumps under `{', '.join(recorder.get('prefixes', []))}`: "
             f"{len(recorder.get('dumps', []))}"]
    if recorder.get("note"):
        lines.append(f"- {recorder['note']}")
    if recorder.get("desync"):
        lines.append(f"- collectives: {recorder['desync']}")
    for dump in recorder.get("dumps", []):
        waiting = dump.get("waiting_in") or {}
        state = (f"waiting in {waiting.get('op')} #{waiting.get('collective_seq_id')} "
                 f"({waiting.get('state')})" if waiting else dump.get("error", "all completed"))
        lines.append(f"- rank {dump.get('rank')}: {state}")
    analysis = recorder.get("analysis")
    if analysis:
        lines += ["", f"torch's analyzer: **{analysis['status']}** "
                      "(flight-recorder/analysis.txt)", "", "```text",
                  *analysis["output"].splitlines()[-MD_LOG_LINES:], "```"]
    return lines


def _stacks_md(processes: Sequence[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for p in processes:
        if p.get("stack"):
            lines += [f"### {process_label(p)}", "", "```text", p["stack"], "```", ""]
        elif "not a Python process" not in (p.get("stack_error") or ""):
            lines.append(f"- {process_label(p)}: no stack: {p.get('stack_error')}")
    return lines[:-1] if lines and lines[-1] == "" else lines or ["(no Python process)"]


def _gpus_md(report: dict[str, Any]) -> list[str]:
    nvml = report.get("nvml") or {}
    lines: list[str] = []
    if nvml.get("status") != "ok":
        lines += [f"NVML: **{nvml.get('status', 'unknown')}**: {nvml.get('detail', '')}"]
    if report["gpus"]:
        if lines:
            lines.append("")
        lines += [*_table(GPU_COLUMNS, gpu_rows(report)), "", "`*`: a process of the job"]
    return lines or ["(no GPU)"]


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    if not rows:
        return ["(none)"]
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns),
            *("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows)]


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _utc(wall: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(wall))
