"""Which rank holds the job up: per-rank phase, progress and counters, and the laggards.

A rank is known from the line itself (a merged log's prefix: torch's `[rank3]:`, torchrun
`--tee`'s `[default3]:`, `srun --label`'s `3: `, Ray's `(WorkerDict pid=N, ip=A)`, ...) or
else from its file (`rank3.log`, `worker-3.log`, torchrun's `.../3/stdout.log`); a file that
names no rank is a member of its own. The engine hands over what it sees anyway: the lines a
rule hits, a block's progress, the newest of the lines it sets aside; this module looks at no
more of a block than its first 256 KiB per file (init lines: the world size) and, in a merged
log, the last lines of each block, so catch-up stays at the prefilter's speed.
"""

from __future__ import annotations

import heapq
import itertools
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

import regex

from hangwatch.core import desync
from hangwatch.core.clock import Clock
from hangwatch.core.durations import format_duration
from hangwatch.core.events import Laggard, RankRow
from hangwatch.core.model import PhaseRule, ProgressRule, RankRule
from hangwatch.core.rules import LineMatch
from hangwatch.core.timestamps import parse_stamp

# Ray, by actor, pid and ip: `(WorkerDict pid=3001, ip=10.0.0.1)`. It ends at the first `)`,
# and no earlier built-in prefix can match at a `(`.
_RAY_PREFIX = r"^\((?P<rank>(?:[\w.:-]+ )?pid=\d+(?:, ip=[\w.:-]+)?)\)"
BUILTIN_PREFIXES = (
    r"\[[Rr]ank ?(?P<rank>\d+)\]",  # torch: `[rank3]:`, `[Rank 3]`
    r"^\[default(?P<rank>\d+)\]:",  # torchrun --tee
    r"^ {0,4}(?P<rank>\d{1,5}): ",  # srun --label
    _RAY_PREFIX,
    r"\brank: ?(?P<rank>\d+) \|",
    r"\bTP(?P<rank>\d+)\]",  # SGLang: `[2025-01-11 10:00:00 TP3]`
    r"/task:(?P<rank>\d+) has connected",  # JAX coordination service
    r"\bprocess_index[=: ]+(?P<rank>\d+)",
)
# Text every match of a built-in prefix holds: a line without it is not searched (a
# substring test costs a tenth of a search, and most lines hold few of these).
_PREFIX_WORDS = dict(zip(BUILTIN_PREFIXES, ("ank", "[default", ": ", "pid=", "rank:", "TP",
                                            "/task:", "process_index"), strict=True))
_WORLD = regex.compile(
    r"\bworld_size[=:] ?(?P<world>\d+)|\bWORLD_SIZE[=:] ?(?P<world>\d+)"
    r"|\bnranks[= ](?P<world>\d+)|\bnum_processes[=:] ?(?P<world>\d+)"
    r"|\b(?P<joined>\d+)/(?P<world>\d+) clients joined|\bMEMBER: \d+/(?P<world>\d+)"
    r"|tasks that reached the barrier: (?P<joined>\d+)/(?P<world>\d+)")
# Words one of which every _WORLD match holds, and how far before it the match may begin:
# None, anywhere before (its numbers come first).
_WORLD_WORDS = (("world_size", 0), ("WORLD_SIZE", 0), ("nranks", 0), ("num_processes", 0),
                ("MEMBER: ", 0), ("tasks that reached the barrier: ", 0),
                ("clients joined", None))




def _world_start(text: str) -> int | None:
    """Where a _WORLD match may begin at the earliest; None when the line holds none of its
    words (most lines: the regex alone costs 30 µs a line; looking for each word with
    `str.find`, 0.4 µs, a third of one `re` search for them all)."""
    first = None
    for word, back in _WORLD_WORDS:
        at = text.find(word)
        if at < 0:
            continue
        if back is None:
            return 0
        if first is None or at < first:
            first = at
    return first


_NUMBER = regex.compile(r"[-+]?\d+(?:\.\d+)?")
_FILE_RANK = re.compile(r"(?:^|[^a-z])(?:rank|worker|proc|process|task)[-_.]?(\d+)(?:\D|$)",
                        re.IGNORECASE)
PREFIX_WINDOW = 256  # characters of a line where its rank prefix may be
PROBE_BYTES = 256 << 10  # of each file, every line is looked at (init lines, prefixes)
TAIL_LINES = 64  # of each later block of a merged log
HELD_LINES = 4096  # set-aside lines of a merged log read at most, for each rank's newest
LINE_KEEP = 300
SCAN_KEEP = 2000  # of a line scanned here, enough for a START pattern
SILENT_MIN_S = 60.0  # a rank silent this much longer than the others went silent first...
SILENT_SHARE = 0.25  # ...or this share of the stall threshold, whichever is longer
QUIET_FIRST_MIN_S = 2.0  # a rank whose lines stopped this much before all the others'
MAX_LAGGARDS = 8  # named in a stall; the rest are counted
MAX_MEMBERS = 4096  # ranks tracked per watch: memory and the verdict's time stay bounded
# Members named by a prefix that is no rank number (Ray's `pid=N`): past this many, the
# prefixes name processes that come and go (restarted workers, a process per task), not ranks.
MAX_ACTORS = 256


@dataclass
class Member:
    """One rank (or one file that names none) as far as the logs tell."""

    rank: str | None
    source: str
    phase: str | None = None
    reached: dict[str, None] = field(default_factory=dict)  # phases started, in order
    last_progress: float | None = None
    last_seen: float = 0.0
    counters: dict[str, float] = field(default_factory=dict)  # by progress rule id
    counter_names: dict[str, str] = field(default_factory=dict)
    last_line: str = ""

    def start(self, phase: str) -> bool:
        moved = self.phase != phase
        self.phase = phase
        self.reached.setdefault(phase, None)
        return moved


@dataclass
class _Source:
    path: str
    rank: str | None  # from the file name
    merged: bool = False  # its lines carry rank prefixes
    probed: int = 0
    # by progress rule id: the ranks its set-aside lines named (None: lines without one)
    held_ranks: dict[str, set[str | None]] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    laggards: tuple[Laggard, ...] = ()
    summary: str = ""
    desync: str = ""
    rows: tuple[RankRow, ...] = ()
    laggards_more: int = 0  # laggards found beyond those named


class RankTracker:
    def __init__(self, rules: Sequence[RankRule], clock: Clock,
                 compile_start: Callable[[PhaseRule], regex.Pattern[str]] | None = None
                 ) -> None:
        self.clock = clock
        self._compile_start = compile_start or (lambda phase: regex.compile(phase.start))
        self._prefix = _compile_prefixes([*BUILTIN_PREFIXES, *(r.match for r in rules)])
        self._sources: dict[str, _Source] = {}
        self.members: dict[str, Member] = {}
        self.works: dict[str, desync.Work] = {}
        self.world: int | None = None
        self.world_line = ""
        self.joined: int | None = None  # the job said this many of `world` joined
        self.actors = 0  # members named by a prefix that is no rank number
        self.not_ranks = ""  # why the prefixes were found to be no set of ranks: said once
        self._starts: dict[str, regex.Pattern[str]] = {}

    # --- what the engine hands over -----------------------------------------------------

    def feed_block(self, source: str, data: bytes, phase: PhaseRule | None) -> None:
        """A block the engine has read: its start while the file is young, the end of it in
        a merged log (prefixes, world size, each rank's last line, and whether it repeats the
        START of the open `phase`: the engine drops such lines from other ranks unseen)."""
        src = self._source(source)
        if src.probed < PROBE_BYTES:
            head = data[:PROBE_BYTES - src.probed]
            src.probed += len(data)
            self._scan(src, head.split(b"\n"), phase)
            if len(head) == len(data):
                return
        if src.merged:
            self._scan(src, data[_tail_start(data, TAIL_LINES):].split(b"\n"), phase)
        else:
            last = data[_tail_start(data, 1):].rstrip(b"\n")
            member = self._member(src, None)
            if member is not None and last:
                # A plain line too says the rank is alive: who went quiet first counts it.
                member.last_seen = self.clock.monotonic()
                member.last_line = last[:LINE_KEEP].decode("utf-8", "replace")

    def matched(self, source: str, text: str, match: LineMatch, progress: bool) -> None:
        """A line some rule hit; `progress`: the engine counted it as progress."""
        src = self._source(source)
        label = self._rank_of(src, text)
        self._world_in(text)
        member = self._member(src, label)
        if member is None:
            return
        if member.rank is not None and desync.marked(text):
            desync.observe(self.works.setdefault(member.rank, desync.Work()), text)
        now = self.clock.monotonic()
        member.last_seen, member.last_line, member.source = now, text[:LINE_KEEP], source
        moved = False
        for rule in match.phase_starts:
            self._start(rule)
            moved |= member.start(rule.id)
        for rule in match.phase_dones:
            if member.phase == rule.id:
                member.phase, moved = None, True
        if match.finish is not None:
            member.phase = None
        for progress_rule, found in match.progress:
            moved |= _count(member, progress_rule, found)
        if progress or moved:
            member.last_progress = now

    def progress(self, source: str) -> None:
        """The engine saw progress in `source` (a plain line): its member moved, unless the
        file is a merged log, where a plain line's rank is not known."""
        src = self._source(source)
        member = self._member(src, None)
        if member is not None:
            member.last_progress = member.last_seen = self.clock.monotonic()

    def held(self, source: str, rule: ProgressRule, matches: Iterator[regex.Match[str]],
             phase: PhaseRule | None) -> Iterator[regex.Match[str]]:
        """Lines of a progress rule that the engine set aside, newest first: each rank's
        newest is taken in (its counter; the open `phase`, whose START such lines may
        repeat). Returns the matches for the engine to go on with, those read included."""
        src = self._source(source)
        taken: list[regex.Match[str]] = []
        seen: set[str | None] = set()
        # Once each rank whose lines this rule saw before is found, older lines change
        # nothing; while the file is young (not all of its ranks met yet), all are read.
        known = src.held_ranks.setdefault(rule.id, set())
        enough = set(known) if src.probed >= PROBE_BYTES else set()
        limit = HELD_LINES if src.merged else 1
        for found in matches:
            taken.append(found)
            label = self._rank_of(src, found.string)
            if label not in seen:
                seen.add(label)
                if len(known) < MAX_MEMBERS:  # flat memory, as for members
                    known.add(label)
                self._held_line(src, label, rule, found, phase)
            if len(taken) >= limit or (enough and enough <= seen):
                break
        return itertools.chain(taken, matches)

    def backdate(self, source: str, idle_s: float) -> None:
        """`source` had been quiet `idle_s` before it was read (its mtime): its members
        last moved then at the latest."""
        at = self.clock.monotonic() - max(0.0, idle_s)
        for member in self.members.values():
            if member.source == source:
                member.last_seen = min(member.last_seen, at)
                if member.last_progress is not None:
                    member.last_progress = min(member.last_progress, at)

    # --- the verdict ---------------------------------------------------------------------

    def verdict(self, threshold: float) -> Verdict:
        if self.not_ranks:
            return Verdict(summary=self.not_ranks)
        members = sorted(self.members.values(), key=lambda m: _order(m.rank or m.source))
        numeric = {m.rank for m in members if m.rank is not None and m.rank.isdigit()}
        world = self.world or 0
        if len(members) < 2 and world < 2 and not self.works:
            return Verdict()
        now = self.clock.monotonic()
        reasons: dict[str, list[str]] = {}
        counter = _main_counter(members)
        for member, why in [*_behind(members, counter), *_silent(members, threshold, now),
                            *_phase_not_reached(members)]:
            reasons.setdefault(_key(member), []).append(why)
        found = desync.summarize(self.works, [m.rank for m in members if m.rank is not None],
                                 span)
        by_rank = {m.rank: m for m in members if m.rank is not None}
        for rank, why in found.diverged if found else ():
            if rank in by_rank:
                reasons.setdefault(_key(by_rank[rank]), []).append(why)
        missing = self._missing(numeric)
        if not reasons and not missing:
            for member, why in _quiet_first(members, counter, now, self.clock.wall()):
                reasons[_key(member)] = [why]
        laggards = [_laggard(m, counter, now, "; ".join(reasons[_key(m)]))
                    for m in members if _key(m) in reasons]
        laggards += [Laggard(None, int(r), None, None, None,
                             f"never logged (world size {world}: {self.world_line})")
                     for r in missing]
        laggards.sort(key=lambda lag: _order(str(lag.rank if lag.rank is not None
                                                 else lag.source)))
        rows = tuple(_row(m, counter, now, _key(m) in reasons) for m in members)
        return Verdict(tuple(laggards[:MAX_LAGGARDS]),
                       self._summary(laggards, members, counter, numeric),
                       found.summary if found else "", rows,
                       max(0, len(laggards) - MAX_LAGGARDS))

    def rows(self) -> list[dict[str, Any]]:
        """Each member as the live view shows it (laggards are judged on a stall only)."""
        if self.not_ranks:
            return []
        members = sorted(self.members.values(), key=lambda m: _order(m.rank or m.source))
        counter = _main_counter(members)
        now = self.clock.monotonic()
        return [_row(m, counter, now, False).to_dict() for m in members]

    def rank_idle(self, limit: int) -> tuple[dict[str, float], float | None]:
        """Seconds since each numbered rank last made progress, for the `limit` lowest rank
        numbers (a bounded, stable set of metric series), and the most of the others (None
        when there are none). Ranks named by a process (Ray's pid=N) are among the others:
        their names are log text and come and go."""
        now = self.clock.monotonic()
        ranked = [(int(m.rank), m) for m in self.members.values()
                  if m.rank is not None and m.rank.isdigit()]
        shown = heapq.nsmallest(limit, ranked, key=lambda pair: pair[0])
        kept = {id(m) for _, m in shown}
        rest = [_idle(m, now) or 0.0 for m in self.members.values()
                if m.rank is not None and id(m) not in kept]
        return ({str(n): _idle(m, now) or 0.0 for n, m in shown},
                max(rest) if rest else None)

    # --- internals -----------------------------------------------------------------------

    def _source(self, path: str) -> _Source:
        src = self._sources.get(path)
        if src is None:
            src = self._sources[path] = _Source(path, rank_from_path(path))
        return src

    def _rank_of(self, src: _Source, text: str) -> str | None:
        label = self._prefix.label(text[:PREFIX_WINDOW])
        if label is not None and not src.merged:
            src.merged = True  # its own lines say the rank: the file stands for none
            self.members.pop(f"source:{src.path}", None)
        return label

    def _member(self, src: _Source, label: str | None) -> Member | None:
        rank = label or src.rank
        if rank is None and src.merged:
            return None  # a merged log's line without a prefix (the launcher's own)
        key = rank if rank is not None else f"source:{src.path}"
        member = self.members.get(key)
        if member is None:
            if self.not_ranks:
                return None
            actor = rank is not None and not rank.isdigit()
            if len(self.members) >= MAX_MEMBERS or (actor and self.actors >= MAX_ACTORS):
                self._not_ranks(src, rank)
                return None
            self.actors += actor
            member = self.members[key] = Member(rank, src.path, last_seen=self.clock.monotonic())
        return member

    def _not_ranks(self, src: _Source, label: str | None) -> None:
        """Stop tracking: the prefixes name more processes than a job has ranks. Judging
        them would name hundreds of finished processes as laggards."""
        count = MAX_MEMBERS if len(self.members) >= MAX_MEMBERS else MAX_ACTORS
        self.not_ranks = (f"not judged: {PurePath(src.path).name} names more than {count} "
                          f"processes by its prefixes (such as {label}); they come and "
                          "go (restarted workers, or a process per task) and are no set of "
                          "ranks")
        self.members.clear()
        self.works.clear()

    def _scan(self, src: _Source, lines: list[bytes], phase: PhaseRule | None) -> None:
        now = self.clock.monotonic()
        # The STARTs a dropped line may repeat: the open phase's, and those of phases some rank
        # reached already (a few).
        phases = dict.fromkeys(p for m in self.members.values() for p in m.reached)
        if phase is not None:
            self._start(phase)
            phases[phase.id] = None
        starts = [(p, self._starts[p]) for p in phases if p in self._starts]
        todo: dict[int, list[tuple[str, regex.Pattern[str]]]] = {}  # by member: not reached
        for raw in lines:
            if not raw:
                continue
            text = raw[:SCAN_KEEP].decode("utf-8", "replace")
            self._world_in(text)
            label = self._rank_of(src, text)
            member = self._member(src, label)
            if member is None:
                continue
            member.last_seen, member.last_line, member.source = now, text[:LINE_KEEP], src.path
            left = todo.get(id(member))
            if left is None:  # as many steps a line as phases its member has yet to reach
                left = todo[id(member)] = [(p, s) for p, s in starts if p not in member.reached]
            for phase_id, start in [(p, s) for p, s in left if s.search(text)]:
                member.start(phase_id)
                left.remove((phase_id, start))

    def _world_in(self, text: str) -> None:
        start = _world_start(text)
        if start is None:
            return
        found = _WORLD.search(text, start)
        if found is None:
            return
        world, quote = int(found.group("world")), found.group(0)
        # The smallest quote of the largest world: the same whichever line came first.
        if world > (self.world or 0) or (world == self.world and quote < self.world_line):
            self.world, self.world_line = world, quote
        if found.group("joined") is not None:
            self.joined = int(found.group("joined"))

    def _held_line(self, src: _Source, label: str | None, rule: ProgressRule,
                   found: regex.Match[str], phase: PhaseRule | None) -> None:
        member = self._member(src, label)
        if member is None:
            return
        moved = _count(member, rule, found)
        if phase is not None and self._start(phase).search(found.string):
            moved |= member.start(phase.id)
        now = self.clock.monotonic()
        member.last_seen, member.last_line = now, found.string[:LINE_KEEP]
        if moved:
            member.last_progress = now

    def _start(self, phase: PhaseRule) -> regex.Pattern[str]:
        pattern = self._starts.get(phase.id)
        if pattern is None:
            pattern = self._starts[phase.id] = self._compile_start(phase)
        return pattern

    def _missing(self, seen: set[str]) -> list[str]:
        """Ranks of the world that never logged, named only where the logs are per rank (two
        ranks or more logged) or the job itself said fewer joined: a job where rank 0
        alone prints has no missing ranks."""
        world = self.world or 0
        said_fewer = self.joined is not None and self.joined < world
        if world < 2 or world > MAX_MEMBERS or not (len(seen) >= 2 or said_fewer):
            return []
        if not said_fewer and _node_share(seen, world):
            return []  # the others write to their own node's log
        return [str(r) for r in range(world) if str(r) not in seen]

    def _summary(self, laggards: list[Laggard], members: list[Member], counter: str | None,
                 numeric: set[str]) -> str:
        if laggards:
            named = "; ".join(f"{_name(lag)}: {lag.why}" for lag in laggards[:3])
            more = f" (and {len(laggards) - 3} more)" if len(laggards) > 3 else ""
            return f"held up by {named}{more}"
        if len(members) >= 2:
            phases = {m.phase for m in members}
            values = {m.counters.get(counter) for m in members} if counter else set()
            what = []
            if len(values) == 1 and None not in values:
                what.append(f"{_counter_name(members, counter)} {_number(values.pop())}")
            if len(phases) == 1 and None not in phases:
                what.append(f"in {phases.pop()}")
            detail = f" ({', '.join(what)})" if what else ""
            span = _node_share(numeric, self.world) if self.world else None
            share = (f"; ranks {span[0]}-{span[1]} of world size {self.world} logged here, "
                     f"one node's share: the others log on their own nodes" if span else "")
            return (f"no rank stands out among {len(members)} {'ranks' if numeric else 'logs'}"
                    f"{detail}: the job is stuck as a whole{share}")
        if self.world and self.world > 1:
            return (f"world size {self.world}, but only {_name_member(members[0])} logged: "
                    f"the others may write elsewhere, or never started")
        return ""


def _node_share(seen: set[str], world: int) -> tuple[int, int] | None:
    """The first and last rank seen, when they are one node's share of the world (`12-15`
    of 20: a block as large as the world divides into, where such a block starts): a
    multi-node job's log of one node, whose other ranks write on their own nodes, not ranks
    that never started. None otherwise."""
    ranks = sorted(int(r) for r in seen if r.isdigit())
    size = len(ranks)
    if (2 <= size < world and world % size == 0 and ranks[0] % size == 0
            and ranks[-1] - ranks[0] + 1 == size):
        return ranks[0], ranks[-1]
    return None


# --- laggard rules --------------------------------------------------------------------------

def _behind(members: list[Member], counter: str | None) -> Iterator[tuple[Member, str]]:
    """Ranks whose counter is behind the others'; when most ranks share a lower value and a
    few are ahead, the few are the odd ones (a skipped collective)."""
    if counter is None:
        return
    having = [m for m in members if counter in m.counters]
    if len(having) < 2:
        return
    name = _counter_name(members, counter)
    top = max(m.counters[counter] for m in having)
    behind = [m for m in having if m.counters[counter] < top]
    ahead = [m for m in having if m.counters[counter] == top]
    if not behind:
        return
    if len(ahead) < len(behind) and len({m.counters[counter] for m in behind}) == 1:
        low = behind[0].counters[counter]
        others = f"{_members(behind)} {_are(behind)} at {name} {_number(low)}"
        for member in ahead:
            yield member, f"ahead: at {name} {_number(top)} while {others}"
        return
    leaders = _members(ahead)
    for member in behind:
        yield member, (f"at {name} {_number(member.counters[counter])} while "
                       f"{leaders} reached {name} {_number(top)}")


def _silent(members: list[Member], threshold: float,
            now: float) -> Iterator[tuple[Member, str]]:
    """Ranks that went quiet well before the others: a minority, silent for longer than the
    others by a margin."""
    times = {id(m): m.last_progress if m.last_progress is not None else m.last_seen
             for m in members}
    newest = max(times.values(), default=now)
    margin = max(SILENT_MIN_S, SILENT_SHARE * threshold)
    silent = [m for m in members if newest - times[id(m)] > margin]
    if not silent or len(silent) * 2 >= len(members):
        return
    for member in silent:
        yield member, (f"silent for {format_duration(now - times[id(member)])}; the others "
                       f"made progress until {format_duration(now - newest)} ago")


def _quiet_first(members: list[Member], counter: str | None, now: float,
                 wall: float) -> Iterator[tuple[Member, str]]:
    """With every rank at the same step and none behind: the rank whose lines stopped first,
    clearly before the others, which stopped close together. It stopped inside the step; the
    others printed on until they waited for it in the next collective. Its time is the job's
    own where every rank's last line has a timestamp, else when the lines arrived."""
    if len(members) < 2 or counter is None:
        return
    values = {m.counters.get(counter) for m in members}
    if len(values) != 1 or None in values:
        return
    stamps = [parse_stamp(m.last_line) for m in members]
    if all(stamp is not None for stamp in stamps):
        times, zone = [float(stamp or 0.0) for stamp in stamps], ""
    else:  # arrival times, shown on the wall clock
        times, zone = [wall - (now - m.last_seen) for m in members], " UTC"
    order = sorted(range(len(members)), key=lambda i: times[i])
    first, second, newest = times[order[0]], times[order[1]], times[order[-1]]
    gap = second - first
    if gap < QUIET_FIRST_MIN_S or gap <= newest - second:
        return
    since = time.strftime("%H:%M:%S", time.gmtime(first))
    yield members[order[0]], (f"quiet since {since}{zone}, {format_duration(gap)} before "
                              "the others")


def _phase_not_reached(members: list[Member]) -> Iterator[tuple[Member, str]]:
    """Ranks that never reached a phase most ranks reached (a file that names no rank and
    prints no phase, such as a launcher's, is not behind in them)."""
    tracking = [m for m in members if m.reached or m.rank is not None]
    order: dict[str, None] = {}
    for member in tracking:
        order.update(member.reached)
    reached = {phase: [m for m in tracking if phase in m.reached] for phase in order}
    named = {phase: _members(who) for phase, who in reached.items()
             if len(who) >= 2 and len(who) * 2 > len(members)}
    for member in tracking:
        for phase, who in named.items():
            if phase in member.reached:
                continue
            where = f"; still in {member.phase}" if member.phase else ""
            yield member, f"never reached {phase} ({who} did){where}"
            break


def _main_counter(members: list[Member]) -> str | None:
    """The progress counter most ranks print (a step counter, usually)."""
    counts: dict[str, int] = {}
    for member in members:
        for rule in member.counters:
            counts[rule] = counts.get(rule, 0) + 1
    return max(counts, key=lambda rule: counts[rule]) if counts else None


def _count(member: Member, rule: ProgressRule, found: regex.Match[str]) -> bool:
    if rule.counter is None:
        return False
    number = _NUMBER.search(found.group(rule.counter) or "")
    if number is None:
        return False
    value = float(number.group())
    previous = member.counters.get(rule.id)
    member.counters[rule.id] = value
    member.counter_names[rule.id] = rule.counter
    return previous != value


# --- text -----------------------------------------------------------------------------------

def rank_from_path(path: str) -> str | None:
    """The rank a file name gives where it is clear: `rank3.log`, `worker-3.out`,
    `proc_3.txt`; torchrun's `--log-dir` layout `.../attempt_0/3/stdout.log`."""
    pure = PurePath(path)
    found = _FILE_RANK.search(pure.name)
    if found is not None:
        return str(int(found.group(1)))
    if pure.name in ("stdout.log", "stderr.log", "error.json") and pure.parent.name.isdigit():
        return str(int(pure.parent.name))
    return None


def span(ranks: Sequence[str]) -> str:
    """`0-3,5,7` for numeric ranks; other labels as they are, after them, separated by `; `
    (a label may hold commas itself, as Ray's `WorkerDict pid=3001, ip=10.0.0.1`)."""
    numbers = sorted({int(r) for r in ranks if r.isdigit()})
    parts: list[str] = []
    for _, run in itertools.groupby(enumerate(numbers), key=lambda p: p[1] - p[0]):
        values = [v for _, v in run]
        parts.append(str(values[0]) if len(values) == 1 else f"{values[0]}-{values[-1]}"
                     if len(values) > 2 else f"{values[0]},{values[1]}")
    named = sorted({r for r in ranks if not r.isdigit()})
    return "; ".join(([",".join(parts)] if parts else []) + named)


def _tail_start(data: bytes, lines: int) -> int:
    """Where the last `lines` lines of a block start, found without copying the block."""
    end = len(data) - 1 if data.endswith(b"\n") else len(data)
    for _ in range(lines):
        end = data.rfind(b"\n", 0, end)
        if end < 0:
            return 0
    return end + 1


class _Prefixes:
    """The rank prefixes, each compiled alone: the leftmost match wins, the first pattern
    on a tie, as in one alternation; but each pattern keeps the literal scan `regex` gives a
    lone pattern, where an alternation of them is tried at every position (46 µs a line
    against 15 µs: this runs on every line a rule hits and on a merged log's block tail).
    A built-in pattern is searched only in a line holding its word, and a match at the
    line's start ends the search (no later pattern can win). A built-in pattern anchored at
    a line's start is only tried there when the text is one line: `regex` tries `^` at every
    position (3 µs on an NCCL line against 0.5 µs)."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self._patterns = [(regex.compile(p, regex.MULTILINE), _PREFIX_WORDS.get(p, ""),
                           p in _PREFIX_WORDS and p.startswith("^")) for p in patterns]
        self._ray = regex.compile(_RAY_PREFIX) if _RAY_PREFIX in patterns else None
        self._actors: dict[str, str] = {}  # a Ray prefix `(Actor pid=N, ip=A)` -> its label

    def label(self, text: str) -> str | None:
        """The rank the prefix of `text` names, as a member's label (`3`, not `03`); None
        when it has none. A line starting with a Ray prefix is named by that prefix, which
        ends at its first `)`: its label is kept by that head, since a merged Ray log
        repeats a few prefixes on every line (0.3 µs a line against 1.6 µs searching)."""
        head = text[:text.find(")") + 1] if text.startswith("(") else ""
        if head and self._ray is not None:
            label = self._actors.get(head)
            if label is not None:
                return label
            ray = self._ray.fullmatch(head)
            if ray is not None:
                if len(self._actors) >= MAX_MEMBERS:
                    self._actors.clear()
                label = self._actors[head] = _label(ray)
                return label
        found = self.search(text)
        return _label(found) if found is not None else None

    def search(self, text: str) -> regex.Match[str] | None:
        best: regex.Match[str] | None = None
        one_line = "\n" not in text
        for pattern, word, at_start in self._patterns:
            if word not in text:
                continue
            found = pattern.match(text) if at_start and one_line else pattern.search(text)
            if found is not None and (best is None or found.start() < best.start()):
                if not found.start():
                    return found
                best = found
        return best


def _label(found: regex.Match[str]) -> str:
    label = found.group("rank").strip()
    return str(int(label)) if label.isdigit() else label


def _compile_prefixes(patterns: Sequence[str]) -> _Prefixes:
    return _Prefixes(patterns)


def _key(member: Member) -> str:
    return member.rank if member.rank is not None else f"source:{member.source}"


def _order(label: str) -> tuple[int, int, str]:
    return (0, int(label), "") if label.isdigit() else (1, 0, label)


def _name(lag: Laggard) -> str:
    return f"rank {lag.rank}" if lag.rank is not None else PurePath(lag.source or "?").name


def _name_member(member: Member) -> str:
    return f"rank {member.rank}" if member.rank is not None else PurePath(member.source).name


def _members(members: Sequence[Member]) -> str:
    ranks = [m.rank for m in members if m.rank is not None]
    files = [PurePath(m.source).name for m in members if m.rank is None]
    text = ", ".join(filter(None, [span(ranks), ", ".join(files)]))
    return f"{'ranks' if len(ranks) > 1 else 'rank'} {text}" if ranks and not files else text


def _are(members: Sequence[Member]) -> str:
    return "are" if len(members) > 1 else "is"


def _counter_name(members: Sequence[Member], counter: str | None) -> str:
    for member in members:
        if counter in member.counter_names:
            return member.counter_names[counter]
    return "counter"


def _number(value: float | None) -> str:
    if value is None:
        return "?"
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _laggard(member: Member, counter: str | None, now: float, why: str) -> Laggard:
    value = member.counters.get(counter) if counter else None
    return Laggard(member.source, _rank_value(member.rank), member.phase, _idle(member, now),
                   _plain(value), why)


def _row(member: Member, counter: str | None, now: float, laggard: bool) -> RankRow:
    value = member.counters.get(counter) if counter else None
    return RankRow(_rank_value(member.rank), member.source, member.phase, _plain(value),
                   _idle(member, now), member.last_line, laggard)


def _idle(member: Member, now: float) -> float | None:
    at = member.last_progress if member.last_progress is not None else member.last_seen
    return round(max(0.0, now - at), 3)


def _rank_value(rank: str | None) -> int | str | None:
    return int(rank) if rank is not None and rank.isdigit() else rank


def _plain(value: float | None) -> float | int | None:
    return int(value) if value is not None and float(value).is_integer() else value
