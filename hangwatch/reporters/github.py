"""GitHub Actions: an `::error` annotation on the run, and a Markdown step summary that says
where the job hung (phase timeline, the frame each process waits in, advice).

Both are written once, when `hangwatch run` ends after a stall.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from hangwatch.core.durations import format_duration
from hangwatch.core.events import Incident
from hangwatch.core.evidence import process_label, stack_frames, telling_frame

TIMELINE_ROWS = 20  # a training loop repeats its phases: the newest entries tell the story
STACK_FRAMES = 12  # innermost frames shown per process in the collapsed full stack
PROCESS_ROWS = 16


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _phase_text(incident: Incident) -> str:
    stall = incident.stall
    if stall.phase is None:
        return "no known phase"
    return f"{stall.phase_title} ({stall.phase})"


def annotation(incident: Incident) -> str:
    """The `::error` workflow command for a stall."""
    stall = incident.stall
    title = f"hangwatch: stall in {_phase_text(incident)}"
    message = (f"No progress for {format_duration(stall.idle_s)} (threshold "
               f"{format_duration(stall.threshold_s)}) in {_phase_text(incident)}; last "
               f"completed phase: {stall.last_completed or 'none'}.")
    if incident.advice:
        message += f" Advice: {incident.advice[0].text}"
    if incident.report:
        message += f" Report: {incident.report}"
    return f"::error title={_escape_property(title)}::{_escape_data(message)}"


def _md(text: str) -> str:
    """Table-cell safe: a pipe or newline would end the cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _timeline(timeline: Sequence[dict[str, Any]]) -> list[str]:
    if not timeline:
        return []
    shown = timeline[-TIMELINE_ROWS:]
    lines = ["### Phase timeline", ""]
    if len(timeline) > len(shown):
        lines += [f"_{len(timeline) - len(shown)} earlier entries not shown._", ""]
    lines += ["| Phase | State | Log line | Took |", "| --- | --- | --- | --- |"]
    for entry in shown:
        took = entry.get("duration_s")
        lines.append(f"| {_md(entry['title'])} (`{entry['phase']}`) | {entry['state']} | "
                     f"{entry['line']} | {format_duration(took) if took is not None else '-'} |")
    return [*lines, ""]


def _stacks(snapshot: dict[str, Any] | None) -> list[str]:
    processes = [p for p in (snapshot or {}).get("processes", []) if p.get("stack")]
    if not processes:
        return []
    lines = ["### Where the processes wait", "", "| Process | Waiting in |", "| --- | --- |"]
    for process in processes[:PROCESS_ROWS]:
        frame = telling_frame(process["stack"]) or "?"
        lines.append(f"| {_md(process_label(process))} | `{_md(frame)}` |")
    if len(processes) > PROCESS_ROWS:
        lines.append(f"| _{len(processes) - PROCESS_ROWS} more in the report_ | |")
    lines.append("")
    for process in processes[:PROCESS_ROWS]:
        frames = stack_frames(process["stack"])[:STACK_FRAMES]
        lines += [f"<details><summary>{process_label(process)}: innermost frames</summary>",
                  "", "```", *frames, "```", "", "</details>"]
    return [*lines, ""]


def summary(incident: Incident, *, timeline: Sequence[dict[str, Any]],
            snapshot: dict[str, Any] | None) -> str:
    """The step summary, in GitHub-flavoured Markdown."""
    stall = incident.stall
    lines = [
        f"## hangwatch: stalled in {_phase_text(incident)}",
        "",
        f"No progress for **{format_duration(stall.idle_s)}** (threshold "
        f"{format_duration(stall.threshold_s)}); last completed phase: "
        f"`{stall.last_completed or 'none'}`. The job was stopped.",
        "",
    ]
    if incident.report:
        lines += [f"Incident report: `{incident.report}`", ""]
    lines += _timeline(timeline)
    lines += _stacks(snapshot)
    if incident.findings:
        lines += ["### Findings", "", *(f"- {_md(f)}" for f in incident.findings), ""]
    if incident.advice:
        lines += ["### Advice", ""]
        lines += [f"- {a.text}  \n  _because: {_md(a.because)}_" for a in incident.advice]
        lines.append("")
    return "\n".join(lines) + "\n"


def report(incident: Incident, *, timeline: Sequence[dict[str, Any]],
           snapshot: dict[str, Any] | None, out: TextIO, summary_path: str | None) -> None:
    """Print the annotation to `out` (the runner reads workflow commands from stdout) and
    append the summary to $GITHUB_STEP_SUMMARY when the runner gave one."""
    print(annotation(incident), file=out, flush=True)
    if not summary_path:
        return
    text = summary(incident, timeline=timeline, snapshot=snapshot)
    try:
        with Path(summary_path).open("a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        print(f"::warning::{_escape_data(f'hangwatch: cannot write the step summary: {exc}')}",
              file=out, flush=True)
