"""Which advice a person sees first: the most specific evidence wins.

A diagnosis chose its advice from what the snapshot showed (stacks, GPUs, processes), and the
more conditions it matched the more it knows; a signal quoted a line of the log; a phase's own
advice says only where the job was; advice for no phase at all says least. Outputs for people
show the first ADVICE_SHOWN and point to report.md for the rest.
"""

from __future__ import annotations

from collections.abc import Sequence

from hangwatch.core.events import Advice, Incident, StallEvent

ADVICE_SHOWN = 3


def _score(item: Advice, stall: StallEvent, diagnosed: set[Advice]) -> int:
    if item in diagnosed:
        # evidence.diagnose joins the conditions a rule matched with "; ".
        return 100 + item.because.count("; ") + 1
    for signal in stall.signals:
        if item in signal.advice:
            return 60 if signal.severity == "error" else 50
    if any(item.because.startswith(f"`{wait.template}` repeated") for wait in stall.waits):
        return 55  # the job's own lines show what it waits for
    return 20 if stall.phase is not None else 0


def rank_advice(stall: StallEvent, diagnosed: Sequence[Advice]) -> list[Advice]:
    """The stall's own advice and the diagnoses' advice, most specific evidence first; ties
    keep the order the rules gave them. Repeated texts are given once."""
    chosen = set(diagnosed)
    unique: dict[str, Advice] = {}
    for item in [*stall.advice, *diagnosed]:
        unique.setdefault(item.text, item)
    return sorted(unique.values(), key=lambda a: -_score(a, stall, chosen))


def shown_advice(incident: Incident) -> tuple[tuple[Advice, ...], int]:
    """The advice to show a person and how many more there are. When no report was written
    there is nowhere else to read them, so all are shown."""
    if not incident.report:
        return incident.advice, 0
    return incident.advice[:ADVICE_SHOWN], max(0, len(incident.advice) - ADVICE_SHOWN)


def more_line(more: int) -> str:
    return f"{more} more in report.md" if more else ""
