"""The incident report: one folder per stall that a person can read, paste into an issue, or
feed to a tool.

    <report_dir>/<UTC time>-<phase>/report.json  everything, machine-readable
                                    report.md    the summary a person reads first
                                    stacks.txt   every Python stack
                                    log-tail.txt the log's last lines

Files are written to a temporary name and renamed, so a reader never sees half a report; they
are private to the user (0600 in a 0700 folder) since stacks and environments say a lot, and
never written through a link planted ahead of them (`hangwatch.storage.files`). Every string passes
through the redactor on its way out, and text from outside is escaped for each file's format
(`hangwatch.escape`): it cannot break out of report.md's code blocks and tables, and the text
files carry no terminal control sequences.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hangwatch.collectors.snapshot import (
    collection_notes,
    key_findings,
)
from hangwatch.core.durations import format_duration
from hangwatch.core.events import Advice, StallEvent
from hangwatch.core.evidence import process_label
from hangwatch.core.stackgroups import frames_phase
from hangwatch.escape import jsontext, markdown
from hangwatch.escape.redact import redact_text, redact_tree
from hangwatch.escape.terminal import visible, visible_lines
from hangwatch.reporters.base import where_text
from hangwatch.reporters.ranks import COLUMNS, grouped, laggard_name
from hangwatch.reporters.snapshot_tables import (
    GPU_COLUMNS,
    GROUP_COLUMNS,
    PROCESS_COLUMNS,
    gpu_rows,
    group_rows,
    process_rows,
    system_lines,
)
from hangwatch.storage.files import new_private_dir, open_report_dir, write_private

MD_LOG_LINES = 40  # the report's own excerpt; log-tail.txt has every line given
MD_TIMELINE_ROWS = 30  # a training loop repeats its phases; report.json keeps them all


def write_incident(report_dir: Path, *, stall: StallEvent, timeline: Sequence[dict[str, Any]],
                   log_tail: Sequence[str], sources: Sequence[str],
                   snapshot: dict[str, Any] | None, advice: Sequence[Advice]) -> Path:
    """Write the four files into a new folder under `report_dir`; return that folder."""
    snap = snapshot or {}
    groups = snap.get("stack_groups") or []
    report: dict[str, Any] = redact_tree({
        "host": socket.gethostname(),  # `hangwatch merge` names each node by it
        "stall": dataclasses.asdict(stall),
        "frames_phase": frames_phase(stall.phase, groups),
        "stack_groups": groups,
        "suspects": snap.get("suspects") or [],
        "stack_summary": snap.get("stack_summary") or "",
        "members": snap.get("members") or [],
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
    tail = [redact_text(line.rstrip("\n")) for line in log_tail]
    flight = _flight_files(report["flight_recorder"])  # before report.json: it says where
    files: dict[str, str | bytes] = {
        "report.json": jsontext.dumps(report, indent=2) + "\n",
        "report.md": render_markdown(report, tail, snapshot is not None),
        "stacks.txt": visible_lines(render_stacks(report["processes"])),
        "log-tail.txt": "".join(visible(line) + "\n" for line in tail),
    }
    return _new_folder(report_dir, stall.wall, stall.phase or "unknown", files, flight)


def write_snapshot(report_dir: Path, snapshot: dict[str, Any]) -> Path:
    """`hangwatch snapshot --report-dir`: the snapshot alone, redacted, in a folder of its own
    next to the incidents (<UTC time>-snapshot/snapshot.json and stacks.txt); that folder."""
    snap = redact_tree(snapshot)
    files: dict[str, str | bytes] = {
        "snapshot.json": jsontext.dumps(snap, indent=2) + "\n",
        "stacks.txt": visible_lines(render_stacks(snap.get("processes", []))),
    }
    return _new_folder(report_dir, snap.get("taken_at") or time.time(), "snapshot", files, {})


def _flight_files(recorder: dict[str, Any] | None) -> dict[str, str | bytes]:
    """The job's Flight Recorder dumps as it wrote them (for torch's analyzer elsewhere), and
    the analysis, as files of the report's `flight-recorder/` folder."""
    files: dict[str, str | bytes] = {}
    if not recorder:
        return files
    for dump in recorder.get("dumps", []):
        with contextlib.suppress(OSError):  # gone, or unreadable: its summary says so
            name = Path(dump["path"]).name
            files[name] = Path(dump["path"]).read_bytes()
            dump["copied_to"] = f"flight-recorder/{name}"
    analysis = recorder.get("analysis")
    if analysis:
        files["analysis.txt"] = (f"{analysis.get('tool', '')}\nstatus: {analysis['status']}"
                                 f"\n\n{analysis['output']}\n")
    return files


def _new_folder(report_dir: Path, wall: float, label: str, files: dict[str, str | bytes],
                flight: dict[str, str | bytes]) -> Path:
    """Make a new private folder under `report_dir` and write `files` into it (and `flight`
    into its flight-recorder/); return it. A name already taken (by an earlier stall, or by
    a link someone planted) is skipped."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(wall))
    label = re.sub(r"[^A-Za-z0-9_.-]+", "_", label)
    with open_report_dir(report_dir) as parent:
        for n in range(1, 1000):
            name = f"{stamp}-{label}" + (f"-{n}" if n > 1 else "")
            try:
                with new_private_dir(parent, name) as folder:
                    _write_all(folder, files)
                    if flight:
                        with new_private_dir(folder, "flight-recorder") as sub:
                            _write_all(sub, flight)
                return report_dir / name
            except FileExistsError:
                continue
    raise FileExistsError(f"too many folders named {stamp}-{label} in {report_dir}")


def _write_all(folder: int, files: dict[str, str | bytes]) -> None:
    for file, data in files.items():
        write_private(folder, file, data.encode("utf-8") if isinstance(data, str) else data)


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
    last = markdown.authored(stall.get("last_completed") or "none")
    out = [f"# Stall: {markdown.authored(where_text(stall))}", ""]
    out += [f"- **No progress for:** {format_duration(stall['idle_s'])} "
            f"(threshold {format_duration(stall['threshold_s'])}, "
            f"{markdown.inline(stall.get('threshold_from') or 'default')})",
            f"- **Detected:** {_utc(stall['wall'])}",
            f"- **Last completed phase:** {last}",
            *([f"- **Between phases:** {markdown.inline(stall['between'])}"]
              if stall.get("between") else []),
            *([f"- **Context:** {markdown.code(stall['context'])}"]
              if stall.get("context") else []),
            *([f"- **Named by:** {markdown.code(stall['marker'])}"] if stall.get("marker")
              else []),
            *([f"- **The frames say:** {markdown.code(report['frames_phase'])} (the log says "
               f"{markdown.code(stall.get('phase') or 'no phase')})"]
              if report.get("frames_phase") else []),
            *([f"- **Usually:** {markdown.inline(stall['usual'])}"] if stall.get("usual")
              else []),
            *(f"- **Repeating:** {markdown.code(w['template'])} repeated {w['count']} times in "
              f"{format_duration(w['span_s'])} ({w['why']})" for w in stall.get("waits") or []),
            f"- **Sources:** {', '.join(markdown.code(s) for s in report['sources']) or 'none'}",
            ""]
    out += _section("Key findings", [f"- {markdown.quoting(line)}"
                                     for line in report["key_findings"]]
                    or ["- (snapshots disabled)" if not snapshot_taken else "- none"])
    if report.get("stack_groups"):
        out += _section("Where the ranks are", where_ranks_md(report))
    out += _section("Advice", _advice_md(report["advice"]) or ["none"])
    signals = stall.get("signals") or []
    if signals:
        out += _section("Signals seen", [
            f"- {markdown.code(s['id'])} ({s['severity']}) {markdown.inline(str(s['source']))}:"
            f"{s['line']}{' ' + markdown.code(s['context']) if s.get('context') else ''}: "
            f"{markdown.code(s['text'])}" for s in signals])
    if stall.get("ranks") or stall.get("rank_summary") or stall.get("desync"):
        out += _section("Ranks", _ranks_md(stall, report["processes"]))
    if report.get("flight_recorder"):
        out += _section("Flight Recorder", _flight_md(report["flight_recorder"]))
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


def where_ranks_md(data: dict[str, Any]) -> list[str]:
    """The groups' sentence, the groups (where, phase, how many, which ranks, which ranks are
    elsewhere) and why each suspect is one; `hangwatch merge` writes the same."""
    lines = [markdown.quoting(data.get("stack_summary") or ""), ""] if data.get(
        "stack_summary") else []
    lines += _table(GROUP_COLUMNS, [
        (markdown.code_cell(row[0]), *(markdown.cell(c) for c in row[1:]))
        for row in group_rows(data)], escaped=True)
    suspects = data.get("suspects") or []
    if suspects:
        lines.append("")
    for suspect in suspects:
        node = f"{suspect['node']}: " if suspect.get("node") else ""
        lines.append(f"- suspect: {markdown.quoting(node + str(suspect.get('why', '')))}")
    return lines


def _advice_md(advice: Sequence[dict[str, str]]) -> list[str]:
    """Numbered advice; the evidence behind a run of advice is said once, after it."""
    lines: list[str] = []
    first = 1
    for i, item in enumerate(advice, 1):
        lines.append(f"{i}. {markdown.authored(item['text'])}")
        if i == len(advice) or advice[i]["because"] != item["because"]:
            which = f" ({first}-{i})" if i > first else ""
            lines.append(f"   - *because{which}:* {markdown.code(item['because'])}")
            first = i + 1
    return lines


def _ranks_md(stall: dict[str, Any], processes: Sequence[dict[str, Any]]) -> list[str]:
    """Who holds the job up, the ranks side by side, and each laggard's stack. Rank names and
    reasons quote the log (prefixes, the line that gave the world size): code spans."""
    lines = _rank_lines(stall)
    table = grouped(stall.get("ranks") or [])
    if table:
        rows = [(_rank_cell(ranks), *(markdown.cell(c) for c in rest))
                for ranks, *rest in table]
        lines += ["", *_table(COLUMNS, rows, escaped=True), "", "`*`: a laggard"]
    for lag in stall.get("laggards") or []:
        if lag.get("rank") is None:
            continue
        mine = [p for p in processes if str(p.get("rank")) == str(lag["rank"])]
        lines += ["", f"### {markdown.code(laggard_name(lag))}: "
                      f"{markdown.code(lag['why'])}", ""]
        if not mine:
            lines.append("(no process of this rank found on this machine: ranks are told "
                         "from `RANK`/`LOCAL_RANK` or `--rank N`)")
        for p in mine:
            body = p.get("stack") or f"(no stack: {p.get('stack_error', 'unknown')})"
            lines += [f"{markdown.inline(process_label(p))}:", "",
                      *markdown.fence(str(body).splitlines())]
    return lines


def _rank_lines(stall: dict[str, Any]) -> list[str]:
    """`stall_lines` for Markdown: the words ours, what they quote in code spans."""
    lines = []
    if stall.get("rank_summary"):
        lines.append(f"- ranks: {markdown.code(stall['rank_summary'])}")
    for lag in stall.get("laggards") or ():
        lines.append(f"- laggard: {markdown.code(laggard_name(lag))}: "
                     f"{markdown.code(lag['why'])}")
    if stall.get("laggards_more"):
        lines.append(f"- laggards: {stall['laggards_more']} more")
    if stall.get("desync"):
        lines.append(f"- collectives: {markdown.code(stall['desync'])}")
    return lines


def _rank_cell(ranks: str) -> str:
    """`0-3,5*`: the ranks (named by the log's prefixes) in code, the laggard mark outside."""
    mark = "\\*" if ranks.endswith("*") else ""
    return markdown.code_cell(ranks.removesuffix("*")) + mark


def _flight_md(recorder: dict[str, Any]) -> list[str]:
    prefixes = ", ".join(recorder.get("prefixes", []))
    lines = [f"- dumps under {markdown.code(prefixes)}: {len(recorder.get('dumps', []))}"]
    if recorder.get("note"):
        lines.append(f"- {markdown.inline(recorder['note'])}")
    if recorder.get("desync"):
        lines.append(f"- collectives: {markdown.inline(recorder['desync'])}")
    for dump in recorder.get("dumps", []):
        waiting = dump.get("waiting_in") or {}
        state = (f"waiting in {waiting.get('op')} #{waiting.get('collective_seq_id')} "
                 f"({waiting.get('state')})" if waiting else dump.get("error", "all completed"))
        lines.append(f"- rank {markdown.inline(str(dump.get('rank')))}: "
                     f"{markdown.inline(str(state))}")
    analysis = recorder.get("analysis")
    if analysis:
        lines += ["", f"torch's analyzer: **{markdown.inline(str(analysis['status']))}** "
                      "(flight-recorder/analysis.txt)", "",
                  *markdown.fence(analysis["output"].splitlines()[-MD_LOG_LINES:])]
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
