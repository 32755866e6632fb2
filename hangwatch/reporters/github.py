"""GitHub Actions: an `::error` annotation on the run, and a Markdown step summary that says
where the job hung: the incident report (phase timeline, the frame each process waits in,
advice, stacks) under a headline.

Both are written once, when `hangwatch run` ends after a stall. Text from outside is escaped
for a workflow command (`hangwatch.escape.github`: it cannot end the command or start
another) and for Markdown (`hangwatch.escape.markdown`): every piece of log text sits in a
code span or block, where it stays.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TextIO

from hangwatch.core.durations import format_duration
from hangwatch.core.events import Incident
from hangwatch.escape import markdown
from hangwatch.escape.github import command_data, command_property

SUMMARY_LIMIT = 512 * 1024  # GitHub refuses a step summary over 1 MiB
_HEADING = re.compile(r"#+ ")
_FENCE = re.compile(r"`{3,}")


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
    if stall.laggards:
        message += f" Ranks: {stall.rank_summary}."
    if incident.advice:
        message += f" Advice: {incident.advice[0].text}"
    if incident.report:
        message += f" Report: {incident.report}"
    return f"::error title={command_property(title)}::{command_data(message)}"


def _report_body(folder: str) -> list[str]:
    """The incident's report.md (timeline, findings with the frame each process waits in,
    advice, stacks), its own title dropped and headings one level down; redacted already."""
    try:
        text = (Path(folder) / "report.md").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    if len(text) > SUMMARY_LIMIT:
        text = text[:text.rfind("\n", 0, SUMMARY_LIMIT) + 1]
        text += f"\n_Cut at {SUMMARY_LIMIT // 1024} KiB: the whole report is in {folder}._\n"
    lines = text.splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    body: list[str] = []
    fence = ""  # the fence of the code block we are in; only as long a fence closes it
    for line in lines:
        opening = _FENCE.match(line)
        if fence and line.rstrip() == fence:
            fence = ""
        elif not fence and opening:
            fence = opening.group()
        body.append("#" + line if not fence and _HEADING.match(line) else line)
    return body


def summary(incident: Incident) -> str:
    """The step summary, in GitHub-flavoured Markdown."""
    stall = incident.stall
    lines = [
        f"## hangwatch: stalled in {markdown.authored(_phase_text(incident))}",
        "",
        f"No progress for **{format_duration(stall.idle_s)}** (threshold "
        f"{format_duration(stall.threshold_s)}); the job was stopped.",
        "",
    ]
    body = _report_body(incident.report) if incident.report else []
    if body and incident.report:
        lines += [f"Incident report: {markdown.code(incident.report)}", *body]
    else:  # the report could not be written: the advice at least
        lines += [f"- {markdown.authored(a.text)}  \n  _because:_ {markdown.code(a.because)}"
                  for a in incident.advice]
    return "\n".join(lines).rstrip() + "\n"


def report(incident: Incident, *, out: TextIO, summary_path: str | None) -> None:
    """Print the annotation to `out` (the runner reads workflow commands from stdout) and
    append the summary to $GITHUB_STEP_SUMMARY when the runner gave one."""
    print(annotation(incident), file=out, flush=True)
    if not summary_path:
        return
    text = summary(incident)
    try:
        with Path(summary_path).open("a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        print(f"::warning::{command_data(f'hangwatch: cannot write the step summary: {exc}')}",
              file=out, flush=True)
