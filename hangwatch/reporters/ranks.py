"""Ranks for people: the laggards and the desync in a few lines, and a per-rank table that
stays short for 8-64 ranks (equal ranks share a row, the odd ones get their own)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hangwatch.core.durations import format_duration
from hangwatch.core.ranks import span

MAX_GROUPS = 12
NAMES_SHOWN = 2  # named ranks (Ray actors, files) listed in a row before "and N more"
COLUMNS = ("rank", "phase", "step", "idle")


def stall_lines(stall: Mapping[str, Any]) -> list[str]:
    """What a stall says of its ranks (a StallEvent as a dict): who holds the job up and
    why, or that no rank stands out; where the collectives stand."""
    lines: list[str] = []
    if stall.get("rank_summary"):
        lines.append(f"ranks: {stall['rank_summary']}")
    for lag in stall.get("laggards") or ():
        lines.append(f"laggard: {laggard_name(lag)}: {lag['why']}")
    if stall.get("laggards_more"):
        lines.append(f"laggards: {stall['laggards_more']} more")
    if stall.get("desync"):
        lines.append(f"collectives: {stall['desync']}")
    return lines


def laggard_name(lag: Mapping[str, Any]) -> str:
    if lag.get("rank") is not None:
        where = f" ({Path(lag['source']).name})" if lag.get("source") else ""
        return f"rank {lag['rank']}{where}"
    return Path(str(lag.get("source") or "?")).name


def grouped(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str, str]]:
    """(ranks, phase, step, idle) rows: ranks in the same phase at the same step share one;
    laggards are listed on their own, first. Only where there is more than one rank."""
    if len(rows) < 2:
        return []
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for row in rows:
        key = (row.get("laggard"), row.get("phase"), row.get("counter"),
               _label(row) if row.get("laggard") else "")
        groups.setdefault(key, []).append(row)
    ordered = sorted(groups.values(), key=lambda g: (not g[0].get("laggard"), len(g)))
    out = [(_ranks(g), g[0].get("phase") or "-", _counter(g[0].get("counter")), _idle(g))
           for g in ordered[:MAX_GROUPS]]
    if len(ordered) > MAX_GROUPS:
        rest = [r for g in ordered[MAX_GROUPS:] for r in g]
        out.append((_ranks(rest), "(more)", "", _idle(rest)))
    return out


def _label(row: Mapping[str, Any]) -> str:
    rank = row.get("rank")
    return str(rank) if rank is not None else Path(str(row.get("source", "?"))).name


def _ranks(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows' ranks as a span, named ones (Ray's actors) a few, then how many more."""
    labels = [_label(r) for r in rows]
    names = sorted({label for label in labels if not label.isdigit()})
    shown = [label for label in labels if label.isdigit()] + names[:NAMES_SHOWN]
    more = f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else ""
    mark = "*" if rows[0].get("laggard") else ""
    return span(shown) + more + mark


def _counter(value: Any) -> str:
    return "-" if value is None else str(value)


def _idle(rows: Sequence[Mapping[str, Any]]) -> str:
    idles = [r["idle_s"] for r in rows if r.get("idle_s") is not None]
    if not idles:
        return "-"
    low, high = format_duration(min(idles)), format_duration(max(idles))
    return low if low == high else f"{low}-{high}"
