"""Which collective each rank is in, read from the NCCL watchdog's own lines.

ProcessGroupNCCL prints, per rank, the work it timed out on and where its queue stands:

    [rank2]:[E1206 ...] [Rank 2] Watchdog caught collective operation timeout:
        WorkNCCL(SeqNum=122, OpType=REDUCE_SCATTER, NumelIn=..., NumelOut=..., ...)
    [rank2]:[E1206 ...] [PG ID 0 PG GUID 0(default_pg) Rank 2] Exception (either an error or
        timeout) detected by watchdog at work: 122, last enqueued NCCL work: 123, last
        completed NCCL work: 121.

Ranks of one process group at different sequence numbers or operations have diverged: that
is what PyTorch's Flight Recorder analysis reports, here taken from the ordinary log.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import regex

_WORK = regex.compile(r"WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)"
                      r"(?:, NumelIn=(?P<nin>\d+), NumelOut=(?P<nout>\d+))?")
_STATUS = regex.compile(
    r"\[PG (?:ID )?(?P<pg>\d+)(?: PG GUID (?P<guid>[^\s\]]+))?[^\]]*\]"
    r".*?(?:at (?:NCCL )?work(?: sequence id)?: (?P<work>\d+))?[^\d]*?"
    r"last enqueued (?:NCCL )?work: (?P<enq>-?\d+),? "
    r"last completed (?:NCCL )?work: (?P<done>-?\d+)")
MARKERS = ("WorkNCCL(", "last enqueued")  # a line without either says nothing here


def marked(text: str) -> bool:
    """Does the line hold one of the MARKERS? (Asked of every line a rule hits: a loop, as
    any() over a generator costs twice this.)"""
    for marker in MARKERS:  # noqa: SIM110
        if marker in text:
            return True
    return False


@dataclass
class Work:
    """Where one rank's queue stood when its watchdog spoke."""

    seq: int | None = None
    op: str | None = None
    numel_in: int | None = None
    numel_out: int | None = None
    group: str | None = None  # the process group, when a status line named it
    enqueued: int | None = None
    completed: int | None = None

    def position(self) -> tuple[str, int, int | None, int | None]:
        return (self.op or "?", self.seq if self.seq is not None else -1, self.numel_in,
                self.numel_out)


def observe(work: Work, text: str) -> bool:
    """Take what a watchdog line says into `work`; False when the line says nothing."""
    found = False
    if (m := _WORK.search(text)) is not None:
        found = True
        work.seq, work.op = int(m["seq"]), m["op"]
        work.numel_in = int(m["nin"]) if m["nin"] else None
        work.numel_out = int(m["nout"]) if m["nout"] else None
    if (s := _STATUS.search(text)) is not None:
        found = True
        work.group = s["guid"] or s["pg"]
        work.enqueued, work.completed = int(s["enq"]), int(s["done"])
        if s["work"] and (work.seq is None or work.seq != int(s["work"])):
            work.seq, work.op, work.numel_in, work.numel_out = int(s["work"]), None, None, None
    return found


@dataclass(frozen=True)
class Desync:
    summary: str
    diverged: tuple[tuple[str, str], ...]  # (rank, why) of each rank out of step


def summarize(works: dict[str, Work], known: Iterable[str],
              span: Callable[[Sequence[str]], str]) -> Desync | None:
    """One line on where the ranks' collectives stand, and the ranks that diverged; None when
    no watchdog line was seen. `span` writes a list of ranks (`0-3,5`)."""
    if not works:
        return None
    parts: list[str] = []
    diverged: list[tuple[str, str]] = []
    for group, members in _groups(works).items():
        text, odd = _group_summary(members, span)
        parts.append(f"process group {group}: {text}" if group != "?" and len(works) > 1
                     and len(_groups(works)) > 1 else text)
        diverged.extend(odd)
    silent = [r for r in known if r not in works]
    if silent:
        parts.append(f"no watchdog line from {_ranks(span, silent)}")
    return Desync("; ".join(parts), tuple(diverged))


def _groups(works: dict[str, Work]) -> dict[str, dict[str, Work]]:
    named = {w.group for w in works.values() if w.group is not None}
    default = next(iter(named)) if len(named) == 1 else "?"
    groups: dict[str, dict[str, Work]] = {}
    for rank, work in works.items():
        groups.setdefault(work.group or default, {})[rank] = work
    return groups


def _group_summary(members: dict[str, Work],
                   span: Callable[[Sequence[str]], str]) -> tuple[str, list[tuple[str, str]]]:
    by_position: dict[tuple[str, int, int | None, int | None], list[str]] = {}
    for rank, work in members.items():
        by_position.setdefault(work.position(), []).append(rank)
    ops_seqs = Counter((op, seq) for op, seq, _, _ in by_position)
    ordered = sorted(by_position.items(), key=lambda kv: -len(kv[1]))

    def where(position: tuple[str, int, int | None, int | None]) -> str:
        op, seq, nin, nout = position
        text = f"{op} SeqNum {seq}" if op != "?" else f"work {seq}"
        if ops_seqs[(op, seq)] > 1:  # same collective, different sizes: say the sizes
            text += f" (NumelIn={nin}, NumelOut={nout})"
        return text

    parts = [f"{_ranks(span, ranks)} in {where(pos)}" for pos, ranks in ordered]
    if len(ordered) == 1:
        completed = {w.completed for w in members.values()}
        tail = (f" (last completed {completed.pop()})" if len(completed) == 1
                and None not in completed else "")
        return f"{parts[0]}{tail}: all at the same collective", []
    top, runner_up = len(ordered[0][1]), len(ordered[1][1])
    if top == runner_up:
        return "; ".join(parts) + ": the ranks disagree", []
    majority_pos, majority = ordered[0]
    odd = [r for _, ranks in ordered[1:] for r in ranks]
    odd_pos = {r: pos for pos, ranks in ordered[1:] for r in ranks}
    why = [(r, f"diverged: in {where(odd_pos[r])} while {_ranks(span, majority)} "
               f"{'are' if len(majority) > 1 else 'is'} in {where(majority_pos)}") for r in odd]
    return "; ".join(parts) + f": {_ranks(span, odd)} diverged", why


def _ranks(span: Callable[[Sequence[str]], str], ranks: Sequence[str]) -> str:
    return f"{'ranks' if len(ranks) > 1 else 'rank'} {span(ranks)}"
