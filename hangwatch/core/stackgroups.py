"""Where every process of the job is, taken together: groups of processes standing at the same
place, and the odd ones out named, with why.

A process's place is read from its main thread's *telling* frames: the innermost frame that is
not plumbing (threading, selectors, multiprocessing, decorators' wrappers, `<module>`) and not
a bare native frame, unless a `stacks:` rule knows it; when a rule knows it, the outermost of
the frames next to it that the same rule knows (the API the program called:
`_BaseDataLoaderIter.__next__`, not the queue it waits on inside). The program's own frame
that led there comes second. When stacks cannot be taken, the kernel's view of the main
thread (wait channel, system call, the file or socket it waits on) stands in, coarser.

Processes are compared with their peers only (members.py: ranks with ranks, workers with
workers). When a clear majority of the peers agrees, the others are suspects; when all agree,
the job is stuck as a whole there.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hangwatch.core.members import Member
from hangwatch.core.ranks import span
from hangwatch.core.stackrules import PEER_WAIT_PHASES, StackRule, rule_for
from hangwatch.core.stacktext import Frame, Thread, main_thread

MAX_FRAMES = 24  # of a group's representative stack, innermost first
# Plumbing: frames that only say "this thread waits" or "this call was wrapped".
# (less the names a job's own script often has: `test.py`, `code.py`)
_STDLIB = frozenset(sys.stdlib_module_names) - {"__main__", "test", "code", "this"}
_PLUMBING_FILES = re.compile(
    r"^(?:torch/utils/_contextlib|torch/distributed/c10d_logger|torch/_compile"
    r"|torch/distributed/elastic/multiprocessing/errors/__init__|torch/nn/modules/module"
    r"|ray/_private/(?:client_mode_hook|auto_init_hook)|ray/util/tracing/tracing_helper"
    r"|click/core|typer/main|fire/core|hydra/_internal/\S+|hydra/main)\.py$|^<frozen ")
_PLUMBING_FUNCTIONS = re.compile(
    r"(?:^|\.)(?:<module>|wrapper|wrapped|inner|_inner|wrap|decorate_context|_call_impl"
    r"|_wrapped_call_impl|_fn|__call__)$")


@dataclass(frozen=True)
class Place:
    """Where one process stands."""

    where: str  # the telling frame, `function (file)`
    function: str  # the same, as a sentence names it
    key: tuple[str, ...]  # the telling frames: processes with equal keys are one group
    frames: tuple[str, ...]  # the main thread's normalised stack, innermost first
    phase: str | None
    label: str | None  # the rule's words ("data loading"), None when no rule knows it


@dataclass(frozen=True)
class StackGroup:
    where: str
    frames: tuple[str, ...]
    pids: tuple[int, ...]
    ranks: tuple[int | None, ...]
    count: int
    phase: str | None
    label: str | None = None
    key: tuple[str, ...] = ()  # the telling frames its processes share (merge groups on it)

    def to_json(self) -> dict[str, object]:
        return {"where": self.where, "frames": list(self.frames), "pids": list(self.pids),
                "ranks": list(self.ranks), "count": self.count, "phase": self.phase,
                "key": list(self.key or (self.where,))}


@dataclass(frozen=True)
class Suspect:
    pid: int
    rank: int | None
    where: str
    phase: str | None
    why: str

    def to_json(self) -> dict[str, object]:
        return {"pid": self.pid, "rank": self.rank, "where": self.where, "phase": self.phase,
                "why": self.why}


@dataclass(frozen=True)
class StackGroups:
    groups: tuple[StackGroup, ...]  # largest first
    suspects: tuple[Suspect, ...]
    summary: str  # one sentence: the suspects' whys, or where the job is stuck as a whole

    def to_json(self) -> dict[str, object]:
        return {"stack_groups": [g.to_json() for g in self.groups],
                "suspects": [s.to_json() for s in self.suspects], "summary": self.summary}


# --- one process's place ----------------------------------------------------------------------

def is_plumbing(frame: Frame) -> bool:
    top = frame.file.split("/", 1)[0].removesuffix(".py")
    return (top in _STDLIB or bool(_PLUMBING_FILES.search(frame.file))
            or bool(_PLUMBING_FUNCTIONS.search(frame.function)))


def place_of(threads: Sequence[Thread], rules: Sequence[StackRule],
             pid: int | None = None) -> Place | None:
    """The place of the main thread; of the first thread that has a telling frame when the
    main thread has none (all plumbing: it only waits for the others)."""
    main = main_thread(tuple(threads), pid)
    ordered = [main, *(t for t in threads if t is not main)] if main else list(threads)
    for thread in ordered:
        place = _place_of_frames(thread.frames, rules)
        if place is not None:
            return place
    if main is None or not main.frames:
        return None
    # Nothing but plumbing (a script asleep at its top level): its innermost frame, then.
    first = main.frames[0]
    return Place(first.text, first.function, (first.text,),
                 tuple(f.text for f in main.frames[:MAX_FRAMES]), None, None)


def _place_of_frames(frames: Sequence[Frame], rules: Sequence[StackRule]) -> Place | None:
    rules_of = [rule_for(f.text, rules) for f in frames]
    start = next((i for i, f in enumerate(frames)
                  if rules_of[i] is not None or not (f.native or is_plumbing(f))), None)
    if start is None:
        return None
    end = start
    rule = rules_of[start]
    if rule is not None:
        # Outward over the frames the same rule knows (decorators in between skipped).
        i = start + 1
        while i < len(frames) and (rules_of[i] is rule or (
                rules_of[i] is None and _PLUMBING_FUNCTIONS.search(frames[i].function))):
            if rules_of[i] is rule:
                end = i
            i += 1
    else:
        rule = next((r for r in rules_of[start + 1:] if r is not None), None)
    caller = next((f for f, r in zip(frames[end + 1:], rules_of[end + 1:], strict=True)
                   if r is None and not (f.native or is_plumbing(f))), None)
    where = frames[end]
    key = (where.text,) if caller is None else (where.text, caller.text)
    shown = tuple(f.text for f in frames[:MAX_FRAMES])
    return Place(where.text, where.function, key, shown,
                 rule.phase if rule else None, rule.label if rule else None)


def unreadable_place(reason: str) -> Place:
    return Place(f"unknown: {reason}", "unknown", ("?", reason), (), None, None)


# --- the job's processes together -------------------------------------------------------------

def group(members: Sequence[Member], places: Mapping[int, Place]) -> StackGroups:
    """Groups (largest first; a process without a place is in none), suspects and a summary."""
    by_key: dict[tuple[str, ...], list[Member]] = {}
    for m in members:
        if m.pid in places:
            by_key.setdefault(places[m.pid].key, []).append(m)
    ordered = sorted(by_key.values(), key=lambda ms: (-len(ms), min(m.pid for m in ms)))
    groups = tuple(_group_of(ms, places[ms[0].pid]) for ms in ordered)
    suspects: list[Suspect] = []
    whole: list[str] = []
    roles: dict[str, list[Member]] = {}
    for m in members:
        if m.compared and m.pid in places and not places[m.pid].where.startswith("unknown:"):
            roles.setdefault(m.role, []).append(m)
    for peers in roles.values():
        found, together = _compare(peers, places)
        suspects.extend(found)
        if together:
            whole.append(together)
    return StackGroups(groups, tuple(suspects), _summary(suspects, whole, groups))


def _group_of(ms: Sequence[Member], place: Place) -> StackGroup:
    ms = sorted(ms, key=lambda m: (m.rank is None, m.rank or 0, m.pid))
    return StackGroup(place.where, place.frames, tuple(m.pid for m in ms),
                      tuple(m.rank for m in ms), len(ms), place.phase, place.label, place.key)


def _compare(peers: Sequence[Member], places: Mapping[int, Place]
             ) -> tuple[list[Suspect], str | None]:
    """(suspects among these peers, or the sentence saying they all stand together)."""
    if len(peers) < 2:
        return [], None
    by_key: dict[tuple[str, ...], list[Member]] = {}
    for m in peers:
        by_key.setdefault(places[m.pid].key, []).append(m)
    if len(by_key) == 1:
        place = places[peers[0].pid]
        return [], f"{_names(peers)} stuck as a whole in `{place.function}`{_words(place)}"
    largest = max(by_key.values(), key=len)
    if 2 * len(largest) <= len(peers):
        largest = _waiting_pair(by_key, places) or []
        if not largest:
            return [], None
    majority_place = places[largest[0].pid]
    suspects = []
    for m in peers:
        if m in largest:
            continue
        place = places[m.pid]
        why = (f"{m.label} is in `{place.function}`{_words(place)} while {_names(largest)} "
               f"wait in `{majority_place.function}`{_words(majority_place)}")
        suspects.append(Suspect(m.pid, m.rank, place.where, place.phase, why))
    return suspects, None


def _waiting_pair(by_key: Mapping[tuple[str, ...], list[Member]],
                  places: Mapping[int, Place]) -> list[Member] | None:
    """Two peers, one waiting for its peers in a collective: the other is the one awaited."""
    if len(by_key) != 2 or any(len(ms) != 1 for ms in by_key.values()):
        return None
    waiting = [ms for ms in by_key.values() if places[ms[0].pid].phase in PEER_WAIT_PHASES]
    return waiting[0] if len(waiting) == 1 else None


def _words(place: Place) -> str:
    return f" ({place.label})" if place.label else ""


def _names(ms: Sequence[Member]) -> str:
    """`ranks 0-2,5`, `rank 3`, or `pids 17,19` when some have no rank."""
    if all(m.rank is not None for m in ms):
        ranks = sorted({m.rank for m in ms if m.rank is not None})
        return f"rank{'s' if len(ranks) > 1 else ''} {span([str(r) for r in ranks])}"
    pids = sorted(m.pid for m in ms)
    return f"pid{'s' if len(pids) > 1 else ''} {','.join(map(str, pids))}"


def _summary(suspects: Sequence[Suspect], whole: Sequence[str],
             groups: Sequence[StackGroup]) -> str:
    if suspects:
        return "; ".join(s.why for s in suspects)
    if whole:
        return "; ".join(whole)
    if not groups:
        return "no stack could be read"
    if len(groups) == 1:
        return f"every process is in `{groups[0].where}`"
    return f"{len(groups)} groups, no clear majority among peers"


# --- the groups as JSON data (report.json, the stall event, `hangwatch merge`) -----------------

def majority_phase(groups: Sequence[Mapping[str, object]]) -> str | None:
    """Where the frames say the job is: the phase of the largest group of ranks (of the
    largest group when no process has a rank)."""
    ranked = [g for g in groups if any(r is not None for r in _list(g.get("ranks")))]
    chosen = (ranked or list(groups))[:1]
    phase = chosen[0].get("phase") if chosen else None
    return phase if isinstance(phase, str) else None


def frames_phase(log_phase: str | None, groups: Sequence[Mapping[str, object]]) -> str | None:
    """The frames' phase when it says something the log's phase does not (else None): both are
    shown side by side then. Generic-layer ids compare without their `generic:` prefix."""
    frames = majority_phase(groups)
    if frames is None or (log_phase or "").removeprefix("generic:") == frames:
        return None
    return frames


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, (list, tuple)) else []
