"""Find, in a whole block of lines at once, the few lines a rule may hit.

Matching every rule against every line costs tens of microseconds a line in Python, and a
job with `NCCL_DEBUG=INFO` writes millions of lines. Hyperscan (installed with hangwatch
where it has wheels) scans a block for all rule patterns in one pass and reports where each
match ends; only the lines it names reach Python. What the engine learns must not
change, so:

* Each pattern is translated, not handed over (`core/translate.py`): on lines of pure ASCII
  an *exact* form gives the rule's own answer; on other lines, and for constructs Hyperscan
  lacks, a wider form finds a superset that `regex` confirms.
* Exact noise rules are not scanned for: a line that only noise hits is merely counted, and
  a plain line matters only as the block's first (it is progress, and ends a stall). So the
  first line nothing hits is looked for line by line from the block's start, and all noise
  lines are found in one scan only when a long run of them (NCCL spew) makes it worthwhile.
* Once the block has shown progress, the lines that matter are rare (DONE, signal and finish
  lines, the START of a phase not open): a progress rule that hits thousands of lines matters
  only by its newest line. So the rest of the block is cut at the lines rare rules may hit,
  found in one scan; between them, a scan that reports each rule once says which rules occur,
  and a stretch where nothing but noise, progress and repeated STARTs occurs is set aside
  whole (`Spans`): Python touches the rules hit, not the lines.

Flags the translation cannot follow (verbose, full case folding, version 1 sets) make
`try_build` return None, and the engine matches line by line.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import itertools
import json
import platform
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import regex

from hangwatch.core import rules as rules_module
from hangwatch.core.model import PhaseRule
from hangwatch.core.rules import LineMatch, RuleSet
from hangwatch.core.translate import EVERY_LINE, Untranslatable, line_forms


class DatabaseStore(Protocol):
    """Keeps compiled databases between runs (`hangwatch/storage/cache.py` on disk):
    compiling the built-in rules takes about half a second, loading them microseconds."""

    def load(self, key: str) -> bytes | None: ...

    def save(self, key: str, blob: bytes) -> None: ...


# --- scanning ------------------------------------------------------------------------------

class Plain:
    """Marks a segment's line as one no rule hits (see `Segment`)."""

    def __repr__(self) -> str:
        return "PLAIN"


PLAIN = Plain()
# (lines, text, match): `lines` lines passed over (noise only, or plain while the caller
# needs no plain line), then, unless `match` is None, one more line: `text` and what
# `RuleSet.match` says of it, a Pending line whose answer is left to be asked, or PLAIN.
# Or `lines` lines and a `Spans` of them that the engine sets aside whole.
Segment = tuple[int, str, "LineMatch | Pending | Plain | Spans | None"]
QUIET = LineMatch()  # stands for "noise only": counted, neither progress nor an event
# See Prefilter.hit_counts: lines hit by kind and rule, lines hit, lines to feed.
HitCounts = tuple[Counter[tuple[str, Any]], int, list[bytes]]
PROBE_LINES = 256  # lines tried one by one for the next plain line before finding all noise
FIRST_WINDOW = 8 << 10  # bytes scanned in full at a block's start: most show progress at once
STRETCH_WINDOW = 16 << 10  # bytes first scanned for STARTs between lines rare rules hit
# After CLOSE_STOPS lines in a row that each came within CLOSE_BYTES of the one before (a
# phase a line: generated step markers), the next DENSE_SPAN bytes go line by line.
CLOSE_STOPS, CLOSE_BYTES, DENSE_SPAN = 4, 1 << 10, 64 << 10
BACK_WINDOW = 4 << 10  # bytes searched first, from the end, for a progress rule's newest line
_Line = tuple[int, int, int]  # start, end (its b"\n"), mask of pattern ids


@dataclass(frozen=True)
class _Entry:
    pid: int  # Hyperscan's id; entries are in the order RuleSet.match reports them
    kind: str  # start, done, signal, noise, progress or finish
    rule: Any
    pattern: regex.Pattern[str]
    exact: bool


_Hit = tuple[_Entry, "regex.Match[str] | None"]


@dataclass(frozen=True)
class _Plan:
    """What a line flagged with some set of patterns needs: the hits it is known to have,
    and the patterns `regex` must still search (progress rules, whose match feeds the
    counter, and patterns not exact on this kind of line)."""

    known: tuple[_Hit, ...]
    search: tuple[_Entry, ...]
    fixed: LineMatch | None  # the answer when no searched pattern matches
    progress_only: bool
    # (STARTs, progress entries) when a line so flagged may be Pending, else None
    defer: tuple[tuple[PhaseRule, ...], tuple[_Entry, ...]] | None


@dataclass(frozen=True)
class Pending:
    """A line that only STARTs, progress rules and noise rules may hit. Once its block has
    shown progress, and its STARTs are of open phases, such a line changes nothing but what
    the progress judge remembers, and only the last one of each rule counts for that: the
    engine may then set it aside in a `Held` instead of asking `Prefilter.resolve`."""

    raw: bytes
    mask: int
    strict: bool
    starts: tuple[PhaseRule, ...]
    progress: tuple[_Entry, ...]


@dataclass(frozen=True)
class Spans:
    """Lines `data[start:end]` of a block that has shown progress, which the engine sets
    aside whole: nothing but noise, progress rules whose memory is a single value, and STARTs
    that would change nothing (the engine said so) may hit them. `progress`: the progress
    rules that may hit some of them, in the order of their first such line."""

    data: bytes
    start: int
    end: int
    progress: tuple[_Entry, ...]


class Held:
    """Lines set aside (Pending lines and Spans), by progress rule, oldest first."""

    def __init__(self, prefilter: Prefilter) -> None:
        self._prefilter = prefilter
        self._lines: dict[int, tuple[_Entry, list[bytes | Spans]]] = {}  # by pattern id

    def __bool__(self) -> bool:
        return bool(self._lines)

    def add(self, pending: Pending) -> None:
        for entry in pending.progress:
            self._lines.setdefault(entry.pid, (entry, []))[1].append(pending.raw)

    def add_spans(self, spans: Spans) -> None:
        for entry in spans.progress:
            self._lines.setdefault(entry.pid, (entry, []))[1].append(spans)

    def release(self) -> Iterator[tuple[Any, Iterator[regex.Match[str]]]]:
        """For each progress rule (ProgressRule), the matches of its lines, newest first:
        the judge takes the first it can use. Empties the hold."""
        held, self._lines = self._lines, {}
        for entry, items in held.values():
            yield entry.rule, self._prefilter.matches(entry, reversed(items))


class Prefilter:
    """Cuts a block of lines into segments that say, of every line, what `RuleSet.match`
    would; a plain line only matters as the block's first (see `Segment`). One thread at a
    time: Hyperscan's scratch space belongs to the database."""

    def __init__(self, rules: RuleSet, entries: Sequence[_Entry], strict: Any,
                 noise: dict[int, str], loose: Sequence[str], status: str,
                 store: DatabaseStore | None = None) -> None:
        self.rules = rules
        self._store = store
        self.status = status
        self._entries = tuple(entries)
        self._noise = tuple(e for e in entries if e.kind == "noise")
        self._strict = strict  # every pattern but the exact noise ones, over whole blocks
        self._other_id = len(entries)  # a byte >= 0x80: the line is checked loosely
        self._noise_forms = list(noise.values())  # exact noise rules, one line at a time
        self._noise_pids = list(noise)
        self._loose_forms = list(loose)  # every pattern, for lines with other bytes
        self._patterns = [e.pattern.pattern for e in entries]
        self._lazy: dict[str, Any] = {}  # databases compiled when first needed
        self._plans: dict[tuple[int, bool], _Plan] = {}
        # What `hit_counts` takes of a line, by its flags (ASCII) or its patterns found.
        self._counts: dict[int, tuple[tuple[tuple[str, Any], ...], bool] | None] = {}
        self._keys_by_hits: dict[int, tuple[tuple[tuple[str, Any], ...], bool]] = {}
        # Once a block has shown progress: the progress rules whose lines are set aside
        # whatever the state, the patterns looked for between rare lines (those and the
        # STARTs), and the rare ones (every other kind but noise, which then never matters).
        self._kept = frozenset(e.pid for e in entries if e.kind == "progress"
                               and _single_valued(e))
        self._first_pids = [e.pid for e in entries if e.kind == "start" or e.pid in self._kept]
        self._rare_pids = [e.pid for e in entries
                           if e.kind not in ("start", "noise") and e.pid not in self._kept]

    def segments(self, data: bytes, wants_plain: Callable[[], bool] = lambda: True,
                 repeats_only: Callable[[PhaseRule], bool] = lambda _rule: False
                 ) -> Iterator[Segment]:
        """The block, cut as `Segment` says; lazily, so that the engine can set lines aside
        as it goes. While `wants_plain()` (the engine judges plain lines until one is
        progress), each plain line is a segment of its own; after that they are counted, and
        stretches of lines the engine would set aside one by one come as `Spans`:
        `repeats_only(rule)` says whether a START of `rule` would change nothing now."""
        if not data:
            return
        if not data.endswith(b"\n"):
            data += b"\n"  # as line-by-line reading takes an unterminated last line
        pos, lines = yield from self._judged(data, wants_plain)
        if pos < len(data):
            lines = yield from self._set_aside(data, pos, lines, repeats_only)
        if lines:
            yield lines, "", None

    def _judged(self, data: bytes,
                wants_plain: Callable[[], bool]) -> Generator[Segment, None, tuple[int, int]]:
        """Segments from the block's start while `wants_plain()`, a line at a time, in
        windows that grow (most blocks show progress in their first lines). Returns where
        it stopped and the lines passed over since the last segment."""
        finder = _PlainFinder(self, data)
        pos = lines = 0
        size = FIRST_WINDOW
        while pos < len(data) and wants_plain():
            end = data.index(b"\n", min(len(data), pos + size) - 1) + 1
            for start, stop, mask in [*self._scan(data, pos, end), (end, end, 0)]:
                while (at := finder.next(pos, start)) is not None:
                    lines += data.count(b"\n", pos, at)
                    pos = data.index(b"\n", at) + 1
                    yield lines, data[at:pos - 1].decode("utf-8", "replace"), PLAIN
                    lines = 0
                    if not wants_plain():
                        return pos, lines
                lines += data.count(b"\n", pos, start)
                if start == end:
                    break
                pos = stop + 1
                found = self._flagged(data[start:stop], mask, plain=True)
                if found is None:
                    lines += 1
                    continue
                yield (lines, *found)
                lines = 0
                if not wants_plain():
                    return pos, lines
            pos, size = end, size * 8
        return pos, lines

    def _set_aside(self, data: bytes, pos: int, lines: int,
                   repeats_only: Callable[[PhaseRule], bool]) -> Generator[Segment, None, int]:
        """Segments of the block from `pos` on, once it has shown progress: the lines rare
        rules may hit, one by one, and what lies between them as `_stretch` cuts it."""
        if self._first_pids and not self._database("first"):  # refused: by flags alone
            return (yield from self._one_by_one(data, pos, len(data), lines, repeats_only))
        for start, stop in [*self._rare(data, pos), (len(data), len(data))]:
            lines = yield from self._stretch(data, pos, start, lines, repeats_only)
            if start == len(data):
                break
            pos = stop + 1
            lines = yield from self._alone(data, start, stop, lines)
        return lines

    def _stretch(self, data: bytes, pos: int, end: int, lines: int,
                 repeats_only: Callable[[PhaseRule], bool]) -> Generator[Segment, None, int]:
        """Lines `pos` to `end` of a block that has shown progress, which no rare rule hits:
        as Spans up to the first line a START that would change something may hit, that line
        on its own, and so on. Each scan covers a window that grows while nothing stops it,
        and after a stop spans twice the distance to it (STRETCH_WINDOW at least); a run of
        stops close together goes line by line on the flags (`_one_by_one`), so that a
        stretch where every line starts a phase costs no more than one scan of it. Returns
        the lines passed over since the last segment."""
        size, close = STRETCH_WINDOW, 0
        while pos < end:
            if close >= CLOSE_STOPS:  # a phase a line or so: scans would cost more than lines
                high = end if end - pos <= DENSE_SPAN else data.index(
                    b"\n", pos + DENSE_SPAN - 1) + 1
                lines = yield from self._one_by_one(data, pos, high, lines, repeats_only)
                pos, size, close = high, STRETCH_WINDOW, 0
                continue
            high = end if end - pos <= size else data.index(b"\n", pos + size - 1) + 1
            firsts = self._firsts(data, pos, high)
            stops = [self._first_kept(data, entry, at, high, repeats_only)
                     if entry.rule.origin.generic else at
                     for pid, at in firsts.items() if pid not in self._kept
                     and not repeats_only((entry := self._entries[pid]).rule)]
            stop = min((at for at in stops if at is not None), default=None)
            cut = high if stop is None else max(pos, data.rfind(b"\n", pos, stop - 1) + 1)
            spans = tuple(self._entries[pid] for pid, at in sorted(
                firsts.items(), key=lambda item: item[1]) if pid in self._kept and at <= cut)
            lines += data.count(b"\n", pos, cut)
            if spans:
                yield lines, "", Spans(data, pos, cut, spans)
                lines = 0
            if stop is None:
                pos, size = high, size * 4
                continue
            size = max(STRETCH_WINDOW, 2 * (stop - pos))
            close = close + 1 if stop - pos < CLOSE_BYTES else 0
            pos = data.index(b"\n", stop - 1) + 1
            lines = yield from self._alone(data, cut, pos - 1, lines)
        return lines

    def _one_by_one(self, data: bytes, pos: int, end: int, lines: int,
                    repeats_only: Callable[[PhaseRule], bool]) -> Generator[Segment, None, int]:
        """The flagged lines from `pos` to `end`, judged by their flags alone where that
        suffices: those the engine would set aside are gathered into Spans, the others are
        segments of their own."""
        held: dict[int, _Entry] = {}  # progress rules of the lines gathered since `pos`
        repeats: dict[int, bool] = {}  # by STARTs' tuple, until a segment moves the engine
        for start, stop, mask in self._scan(data, pos, end):
            if not mask >> self._other_id & 1:  # pure ASCII: the flags are exact
                defer = self._plan(mask, True).defer
                if defer is not None:
                    repeat = repeats.get(id(defer[0]))
                    if repeat is None:
                        repeat = repeats[id(defer[0])] = all(map(repeats_only, defer[0]))
                    if repeat:
                        held.update((e.pid, e) for e in defer[1])
                        continue
            lines += data.count(b"\n", pos, start)
            if held:
                yield lines, "", Spans(data, pos, start, tuple(held.values()))
                lines, held = 0, {}
            pos = stop + 1
            lines = yield from self._alone(data, start, stop, lines, mask)
            repeats.clear()
        lines += data.count(b"\n", pos, end)
        if held:
            yield lines, "", Spans(data, pos, end, tuple(held.values()))
            lines = 0
        return lines

    def _alone(self, data: bytes, start: int, stop: int, lines: int,
               mask: int | None = None) -> Generator[Segment, None, int]:
        """Line `data[start:stop]` (flagged with `mask`, else scanned alone) as a segment of
        its own after `lines` lines passed over; returns the lines passed over since."""
        raw = data[start:stop]
        found = self._flagged(raw, self._line_mask(raw) if mask is None else mask,
                              plain=False)
        if found is None:
            return lines + 1
        yield (lines, *found)
        return 0

    def _first_kept(self, data: bytes, entry: _Entry, at: int, high: int,
                    repeats_only: Callable[[PhaseRule], bool]) -> int | None:
        """For a generic START that would change something, first hit at `at`: the end of
        the first line up to `high` where it counts, None if there is none. It does not
        count where a pack rule on the line outranks it and the engine sets the line aside
        (a wait loop a pack counts): such lines come in series, so they are told apart by
        their flags, without a segment each."""
        low = data.rfind(b"\n", 0, at - 1) + 1
        found: list[int] = []

        def on_match(_pid: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            found.append(low + end - 1)

        self._database(f"one:{entry.pid}").scan(memoryview(data)[low:high],
                                                match_event_handler=on_match)
        done = -1
        for last in sorted(found):
            if last <= done:
                continue
            done = data.index(b"\n", last)
            mask = self._line_mask(data[data.rfind(b"\n", 0, last) + 1:done])
            defer = None if mask >> self._other_id & 1 else self._plan(mask, True).defer
            if defer is None or not all(map(repeats_only, defer[0])):
                return done + 1
        return None

    def _flagged(self, raw: bytes, mask: int,
                 plain: bool) -> tuple[str, LineMatch | Pending | Plain] | None:
        """What a flagged line is as a segment (text and match), or None when it is only
        counted (noise, or plain while the caller needs no plain line)."""
        candidates = self._candidates(raw, mask)
        if candidates is not None and candidates[0] and (
                pending := self._pending(raw, candidates)) is not None:
            return "", pending
        text, match = self._line(raw, candidates)
        if match is None:
            return (text, PLAIN) if plain else None
        return None if match is QUIET else (text, match)

    def resolve(self, pending: Pending) -> tuple[str, LineMatch | None]:
        """What RuleSet.match says of a Pending line (QUIET: noise only)."""
        return self._line(pending.raw, (pending.mask, pending.strict))

    def matches(self, entry: _Entry,
                items: Iterable[bytes | Spans]) -> Iterator[regex.Match[str]]:
        """Where `entry`'s pattern matches these lines (a Spans: its lines newest first),
        skipping those it does not."""
        for item in items:
            raws = self._newest(entry, item) if isinstance(item, Spans) else (item,)
            for raw in raws:
                found = self._search(entry.pattern, raw.decode("utf-8", "replace"))
                if found is not None:
                    yield found

    def _newest(self, entry: _Entry, spans: Spans) -> Iterator[bytes]:
        """The lines of `spans` that `entry`'s wider form hits, newest first: found in
        windows searched from the end, each larger than the one before, since the caller
        mostly wants one line."""
        data, end, size = spans.data, spans.end, BACK_WINDOW
        db = self._database(f"one:{entry.pid}")
        found: list[int] = []

        def on_match(_pid: int, _start: int, at: int, _flags: int, _ctx: object) -> None:
            found.append(at)

        while end > spans.start:
            start = max(spans.start, data.rfind(b"\n", spans.start, max(0, end - size)) + 1)
            found.clear()
            db.scan(memoryview(data)[start:end], match_event_handler=on_match)
            for stop in sorted({data.index(b"\n", start + at - 1) for at in found},
                               reverse=True):
                yield data[data.rfind(b"\n", 0, stop) + 1:stop]
            end, size = start, size * 4

    def hit_counts(self, data: bytes,
                   unmatched: Callable[[bytes], bool] | None = None) -> HitCounts:
        """For `hangwatch rules test` on lines it does not show, a block of complete lines:
        how many lines each rule hits, by kind (as `RuleSet.match` reports them: one noise
        rule a line), how many lines some rule hits, and the lines a rule other than noise
        hits, in order. Lines no rule hits go to `unmatched`, in order, until it returns
        False. A line that only rules exact on it hit needs no `regex` search."""
        first_noise = self._first_noise(data)
        counts: Counter[tuple[str, Any]] = Counter()
        feed: list[bytes] = []
        finder = _PlainFinder(self, data)
        wanted, take = unmatched is not None, unmatched or (lambda _raw: False)
        flagged = self._scan(data)
        loose = self._loose_masks(data, [(s, e) for s, e, m in flagged
                                         if m >> self._other_id & 1])
        seen: dict[int, tuple[tuple[tuple[str, Any], ...], int]] = {}  # keys (cached), lines
        hit = pos = 0
        for start, end, mask in [*flagged, (len(data), len(data), 0)]:
            while wanted and (at := finder.next(pos, start)) is not None:
                pos = data.index(b"\n", at) + 1
                wanted = take(data[at:pos - 1])
            if start == len(data):
                break
            pos = end + 1
            noise = first_noise.pop(end, None)
            known = None
            if not mask >> self._other_id & 1:
                known = self._counted(mask | (0 if noise is None
                                              else 1 << self._noise_pids[noise]))
            elif loose is not None:
                known = self._confirmed(data[start:end], loose[start])
            if known is None:
                raw = data[start:end]
                match = self._full(raw, self._candidates(raw, mask))
                known = ((), False) if match is None else _keys(match)
            keys, more = known
            if keys:
                hit += 1
                seen[id(keys)] = (keys, seen.get(id(keys), (keys, 0))[1] + 1)
            elif wanted:
                wanted = take(data[start:end])
            if more:
                feed.append(data[start:end])
        for keys, n in seen.values():  # hashing rules costs more than counting by tuple
            for key in keys:
                counts[key] += n
        for i in first_noise.values():
            counts[("noise", self._entries[self._noise_pids[i]].rule)] += 1
        return counts, hit + len(first_noise), feed

    def _counted(self, mask: int) -> tuple[tuple[tuple[str, Any], ...], bool] | None:
        """What `hit_counts` takes of an ASCII line so flagged (exact noise included): the
        (kind, rule) pairs it counts and whether more than noise hits; None when a `regex`
        search must decide."""
        if mask not in self._counts:
            plan = self._plan(mask, True)
            exact = all(e.exact for e in plan.search)  # progress rules: sure hits, uncounted
            hits = sum(1 << e.pid for e in (*(e for e, _ in plan.known), *plan.search))
            self._counts[mask] = self._keyed(hits) if exact else None
        return self._counts[mask]

    def _loose_masks(self, data: bytes, lines: list[tuple[int, int]]) -> dict[int, int] | None:
        """Line start -> the patterns whose loose forms hit it, for these lines (with bytes
        >= 0x80), found in one scan of them all; None when Hyperscan refused the forms."""
        if not lines:
            return {}
        db = self._database("loose-all")
        if not db:
            return None
        joined = b"\n".join(data[start:end] for start, end in lines) + b"\n"
        ends = list(itertools.accumulate(end - start + 1 for start, end in lines))
        masks = [0] * len(lines)

        def on_match(pid: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            masks[bisect.bisect_left(ends, end)] |= 1 << pid  # a match ends before its "\n"

        db.scan(joined, match_event_handler=on_match)
        return {start: mask for (start, _), mask in zip(lines, masks, strict=True)}

    def _confirmed(self, raw: bytes, mask: int) -> tuple[tuple[tuple[str, Any], ...], bool]:
        """What `hit_counts` takes of a line with other bytes whose loose forms `mask` hit:
        each of those patterns is searched for with `regex`."""
        text = raw.decode("utf-8", "replace")
        hits = 0
        for pid in _bits(mask):
            if pid < self._other_id and self._search(self._entries[pid].pattern, text):
                hits |= 1 << pid
        return self._keyed(hits)

    def _keyed(self, hits: int) -> tuple[tuple[tuple[str, Any], ...], bool]:
        """The (kind, rule) pairs a line that these patterns hit counts, and whether more
        than noise hits it: as `_line_match`, and when only noise counts (a pack's noise
        outranks generic words), the first noise rule, as RuleSet.match says."""
        known = self._keys_by_hits.get(hits)
        if known is None:
            entries = [self._entries[pid] for pid in _bits(hits)]
            match = _line_match([(e, None) for e in entries])
            if match is QUIET:
                match = LineMatch(noise=next(e.rule for e in entries if e.kind == "noise"))
            known = self._keys_by_hits[hits] = ((), False) if match is None else _keys(match)
        return known

    def hit_lines(self, data: bytes, *, noise_lines: bool = True
                  ) -> tuple[list[tuple[int, bytes, LineMatch]], Counter[Any]]:
        """For `hangwatch rules test`: every line of a block of complete lines that a rule
        hits, as (its index in the block, the line, what `RuleSet.match` says of it), noise
        included, in order. With `noise_lines=False`, lines that only exact noise rules hit
        (NCCL spew: most of a log, needing no detail) are not listed, only counted by rule."""
        flagged = self._scan(data)
        first_noise = self._first_noise(data)  # by line end, of the lines exact noise hits
        rows: list[tuple[int, int, LineMatch]] = []  # (line start, line end, match)
        for start, end, mask in flagged:
            match = self._full(data[start:end], self._candidates(data[start:end], mask))
            if match is not None:
                rows.append((start, end, match))
            first_noise.pop(end, None)
        rules = [self._entries[pid].rule for pid in self._noise_pids]
        noise: Counter[Any] = Counter()
        if noise_lines:
            rows += [(data.rfind(b"\n", 0, end) + 1, end, LineMatch(noise=rules[i]))
                     for end, i in first_noise.items()]
            rows.sort(key=lambda row: row[0])
        else:
            for i, n in Counter(first_noise.values()).items():
                noise[rules[i]] = n
        lines: list[tuple[int, bytes, LineMatch]] = []
        index = pos = 0
        for start, end, match in rows:
            index += data.count(b"\n", pos, start)
            pos = start
            lines.append((index, data[start:end], match))
        return lines, noise

    def _first_noise(self, data: bytes) -> dict[int, int]:
        """Line end -> index in `_noise_forms` of the first exact noise rule that hits the
        line, for the lines of pure ASCII (where those rules are exact) that they hit. Their
        order is the rules' order, and a noise rule that is not exact flags its line (so a
        line it hits is not taken from here)."""
        if not self._noise_forms:
            return {}
        codes: list[int] = []
        add = codes.append

        def on_match(i: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            add(end << 16 | i)  # `[^\n]*$`: one report a line and rule, at the line's end

        self._database("each-noise").scan(data, match_event_handler=on_match)
        codes.sort(reverse=True)  # the first rule of each line is the last one kept
        return {code >> 16: code & 0xFFFF for code in codes}

    def _full(self, raw: bytes, candidates: tuple[int, bool] | None) -> LineMatch | None:
        """What `RuleSet.match` says of a flagged line, with the noise rule a QUIET line hits."""
        text, match = self._line(raw, candidates)
        if match is not QUIET:
            return match
        if candidates is None:
            return self.rules.match(text)
        mask, strict = candidates
        if strict:
            mask |= self._noise_mask(raw)
        rule = next((e.rule for e in self._noise if mask >> e.pid & 1
                     and ((strict and e.exact) or self._search(e.pattern, text))), None)
        return None if rule is None else LineMatch(noise=rule)  # None: a search timed out

    def _scan(self, data: bytes, low: int = 0, high: int | None = None) -> list[_Line]:
        """The lines from `low` to `high` (line starts) that some pattern (other than an
        exact noise rule) may hit, or with a byte >= 0x80, in order."""
        codes: list[int] = []
        add = codes.append

        def on_match(pid: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            add((low + end) << 16 | pid)

        self._strict.scan(memoryview(data)[low:high], match_event_handler=on_match)
        codes.sort()
        lines: list[_Line] = []
        start = end = -1
        mask = 0
        for code in codes:
            last = (code >> 16) - 1  # the match's last byte lies on its line
            if last > end:
                if mask:
                    lines.append((start, end, mask))
                end = data.find(b"\n", last)
                start = data.rfind(b"\n", 0, last) + 1
                mask = 0
            mask |= 1 << (code & 0xFFFF)
        if mask:
            lines.append((start, end, mask))
        return lines

    def _candidates(self, raw: bytes, mask: int) -> tuple[int, bool] | None:
        """The patterns that may hit a flagged line, and whether their strict forms (exact
        on ASCII lines, less the exact noise rules) found them; None when Hyperscan refused
        the loose forms a line with other bytes needs."""
        if not mask >> self._other_id & 1:
            return mask, True
        loose = self._database("loose")
        if not loose:
            return None
        hits = 0

        def on_match(pid: int, _start: int, _end: int, _flags: int, _ctx: object) -> None:
            nonlocal hits
            hits |= 1 << pid

        loose.scan(raw + b"\n", match_event_handler=on_match)  # as in a block
        return hits, False

    def _line_mask(self, raw: bytes) -> int:
        """What `_scan` says of one line: the patterns that may hit it."""
        hits = 0

        def on_match(pid: int, _start: int, _end: int, _flags: int, _ctx: object) -> None:
            nonlocal hits
            hits |= 1 << pid

        self._strict.scan(raw + b"\n", match_event_handler=on_match)
        return hits

    def _rare(self, data: bytes, low: int) -> list[tuple[int, int]]:
        """(start, end) of the lines from `low` on that a rare rule (DONE, signal, finish, a
        progress rule keyed by more than its counter) may hit, in order."""
        ends: set[int] = set()

        def on_match(_pid: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            ends.add(end)

        db = self._database("rare")
        if db:
            db.scan(memoryview(data)[low:], match_event_handler=on_match)
        found: list[tuple[int, int]] = []
        for end in sorted(ends):
            at = low + end - 1  # the match's last byte lies on its line
            if not found or at > found[-1][1]:
                found.append((data.rfind(b"\n", 0, at) + 1, data.index(b"\n", at)))
        return found

    def _firsts(self, data: bytes, low: int, high: int) -> dict[int, int]:
        """Pattern id -> end of its first match from `low` to `high`, for the STARTs and the
        progress rules that the engine may set aside (`_kept`): each reports once a scan."""
        firsts: dict[int, int] = {}

        def on_match(pid: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            firsts.setdefault(pid, low + end)

        if self._first_pids:
            self._database("first").scan(memoryview(data)[low:high],
                                         match_event_handler=on_match)
        return firsts

    def _pending(self, raw: bytes, candidates: tuple[int, bool]) -> Pending | None:
        plan = self._plan(*candidates)
        if plan.defer is None:
            return None
        return Pending(raw, *candidates, *plan.defer)

    def _line(self, raw: bytes,
              candidates: tuple[int, bool] | None) -> tuple[str, LineMatch | None]:
        """What RuleSet.match says of a flagged line."""
        text = raw.decode("utf-8", "replace")
        if candidates is None:  # ask every rule
            found = self.rules.match(text)
            if found is not None and found == LineMatch(noise=found.noise):
                return text, QUIET
            return text, found
        mask, strict = candidates
        if strict:
            mask |= self._noise_mask(raw)
        return text, self._confirm(text, mask, strict=strict)

    def _noise_mask(self, raw: bytes) -> int:
        """Pattern ids of the exact noise rules that hit an ASCII line."""
        if not self._noise_forms:
            return 0
        hits = 0
        pids = self._noise_pids

        def on_match(i: int, _start: int, _end: int, _flags: int, _ctx: object) -> None:
            nonlocal hits
            hits |= 1 << pids[i]

        self._database("probe").scan(raw + b"\n", match_event_handler=on_match)
        return hits

    def _database(self, name: str) -> Any:
        if name not in self._lazy:
            store = self._store
            if name == "probe":
                db = _compile(self._noise_forms, single=True, store=store)
            elif name == "each-noise":
                db = _compile([f"(?:{form})[^\\n]*$" for form in self._noise_forms],
                              store=store)
            elif name == "count":
                db = _compile([f"(?:{'|'.join(self._noise_forms)})[^\\n]*$"], store=store)
            elif name == "first":  # each pattern reports once a scan
                forms = {pid: self._loose_forms[pid] for pid in self._first_pids}
                db = _compilable(forms, self._relaxed, store, single=True)[2] or False
            elif name == "rare" or name.startswith("one:"):
                db = self._wide(self._rare_pids if name == "rare" else [int(name[4:])])
            else:  # "loose" (each pattern once a scan, for one line) or "loose-all"
                _, _, db = _compilable(dict(enumerate(self._loose_forms)), self._relaxed,
                                       store, single=name == "loose")
                db = db or False
            self._lazy[name] = db
        return self._lazy[name]

    def _wide(self, pids: Sequence[int]) -> Any:
        """A database of the loose forms of these patterns, which hit every line the rules
        hit, of any bytes; False when there are none."""
        if not pids:
            return False
        forms = {pid: self._loose_forms[pid] for pid in pids}
        db = _compilable(forms, self._relaxed, self._store)[2]
        return db or _compile([EVERY_LINE], [pids[0]], store=self._store)

    def _relaxed(self, pid: int) -> str:
        return line_forms(self._patterns[pid], anchors=False).loose

    def _confirm(self, text: str, mask: int, strict: bool) -> LineMatch | None:
        plan = self._plan(mask, strict)
        if not plan.search:
            return plan.fixed
        if plan.progress_only:
            progress = tuple((e.rule, m) for e in plan.search
                             if (m := self._search(e.pattern, text)) is not None)
            if not progress:
                return plan.fixed
            if plan.fixed is None or plan.fixed is QUIET:
                noise = next((e.rule for e, _ in plan.known if e.kind == "noise"), None)
                return LineMatch(noise=noise, progress=progress)
            return plan.fixed._replace(progress=progress)
        hits = list(plan.known)
        for entry in plan.search:
            found = self._search(entry.pattern, text)
            if found is not None:
                hits.append((entry, found))
        hits.sort(key=lambda hit: hit[0].pid)
        return _line_match(hits)

    def _plan(self, mask: int, strict: bool) -> _Plan:
        """The plan for lines so flagged, made once."""
        plan = self._plans.get((mask, strict))
        if plan is not None:
            return plan
        entries = [self._entries[pid] for pid in _bits(mask) if pid < self._other_id]
        if strict and any(e.exact and not e.rule.origin.generic for e in entries):
            # A pack rule surely hits the line: the generic layer's hits would not count.
            entries = [e for e in entries if not e.rule.origin.generic]
        search = tuple(e for e in entries if e.kind == "progress" or not (strict and e.exact))
        known = tuple((e, None) for e in entries if e not in search)
        # A progress hit beside generic ones decides which of them count: the full path.
        progress_only = all(e.kind == "progress" for e in search) and not any(
            e.rule.origin.generic for e in entries)
        plan = _Plan(known, search, _line_match(list(known)), progress_only,
                     _deferrable(entries))
        self._plans[(mask, strict)] = plan
        return plan

    def _search(self, pattern: regex.Pattern[str], text: str) -> regex.Match[str] | None:
        try:
            return pattern.search(text, timeout=rules_module.MATCH_TIMEOUT_S)
        except TimeoutError:
            self.rules.timeouts += 1
            return None


class _PlainFinder:
    """Finds, between two flagged lines, the next line no exact noise rule hits either. Such
    lines are pure ASCII, where the strict forms are exact. Lines are tried one by one; past
    PROBE_LINES in a block (NCCL spew), all noise lines are found in one scan."""

    def __init__(self, prefilter: Prefilter, data: bytes) -> None:
        self._prefilter = prefilter
        self._data = data
        self._probes = 0
        self._noisy: list[int] | None = None  # ends of every noise line, once scanned

    def next(self, pos: int, limit: int) -> int | None:
        data = self._data
        while pos < limit:
            if not self._prefilter._noise_forms:
                return pos
            end = data.index(b"\n", pos)
            if not self._is_noise(pos, end):
                return pos
            pos = end + 1
        return None

    def _is_noise(self, pos: int, end: int) -> bool:
        if self._noisy is None and self._probes < PROBE_LINES:
            self._probes += 1
            return bool(self._prefilter._noise_mask(self._data[pos:end]))
        if self._noisy is None:
            noisy: list[int] = []
            add = noisy.append

            def on_match(_pid: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
                add(end)  # the pattern ends in `[^\n]*$`: one report a line, at its end

            self._prefilter._database("count").scan(self._data, match_event_handler=on_match)
            noisy.sort()
            self._noisy = noisy
        i = bisect.bisect_left(self._noisy, end)
        return i < len(self._noisy) and self._noisy[i] == end


def _bits(mask: int) -> Iterator[int]:
    """The positions of the bits set in `mask`, lowest first: as many steps as bits."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _deferrable(entries: list[_Entry]) -> tuple[tuple[PhaseRule, ...], tuple[_Entry, ...]] | None:
    """(STARTs, progress entries) of a line these entries may hit, when it could be Pending:
    no DONE, signal or finish rule among them, and every progress rule one whose memory is
    a single value (a heartbeat, or a counter with no other named group to key it)."""
    if any(e.kind not in ("start", "progress", "noise") for e in entries):
        return None
    progress = tuple(e for e in entries if e.kind == "progress")
    if not all(_single_valued(e) for e in progress):
        return None
    return tuple(e.rule for e in entries if e.kind == "start"), progress


def _single_valued(entry: _Entry) -> bool:
    """A progress rule whose memory is a single value: a heartbeat, or a counter with no
    other named group to key it (so only its newest line matters)."""
    rule = entry.rule
    return rule.counter is None or not set(entry.pattern.groupindex) - {rule.counter}


def _line_match(hits: list[_Hit]) -> LineMatch | None:
    """The LineMatch RuleSet.match gives for these hits (in pattern order); QUIET when only
    noise rules hit."""
    if not hits:
        return None
    if any(e.rule.origin.generic for e, _ in hits) and not all(
            e.rule.origin.generic for e, _ in hits):
        hits = [hit for hit in hits if not hit[0].rule.origin.generic]  # rules.prefer_packs
    found: dict[str, list[Any]] = {}
    for entry, match in hits:
        found.setdefault(entry.kind, []).append(
            (entry.rule, match) if entry.kind == "progress" else entry.rule)
    if found.keys() == {"noise"}:
        return QUIET
    return LineMatch(tuple(found.get("start", ())), tuple(found.get("done", ())),
                     tuple(found.get("signal", ())), (found.get("noise") or [None])[0],
                     tuple(found.get("progress", ())), (found.get("finish") or [None])[0])


def _keys(match: LineMatch) -> tuple[tuple[tuple[str, Any], ...], bool]:
    """The (kind, rule) pairs a line's match counts, and whether more than noise hit it."""
    keys = (*(("done", r) for r in match.phase_dones),
            *(("start", r) for r in match.phase_starts),
            *(("signal", r) for r in match.signals),
            *(("progress", r) for r, _ in match.progress),
            *((("noise", match.noise),) if match.noise is not None else ()),
            *((("finish", match.finish),) if match.finish is not None else ()))
    return keys, match._replace(noise=None) != QUIET


def _entries(rules: RuleSet) -> list[tuple[str, Any, str]]:
    """(kind, rule, pattern) in the order RuleSet.match reports them."""
    return [
        *(("start", p, p.start) for p in rules.phases),
        *(("done", p, p.done) for p in rules.phases if p.done),
        *(("signal", s, s.match) for s in rules.signals),
        *(("noise", n, n.match) for n in rules.noise),
        *(("progress", p, p.match) for p in rules.progress),
        *(("finish", f, f.match) for f in rules.finish),
    ]


def _compile(expressions: Sequence[str], ids: Sequence[int] | None = None, *,
             single: bool = False, store: DatabaseStore | None = None) -> Any:
    """A Hyperscan database, or None when Hyperscan refuses the patterns. `single`: each
    pattern reports once a scan (for scans of one line, where only which ones hit matters).
    With a `store`, a database compiled before from the same input is loaded instead."""
    import hyperscan

    flags = hyperscan.HS_FLAG_MULTILINE | (hyperscan.HS_FLAG_SINGLEMATCH if single else 0)
    ids = list(ids or range(len(expressions)))
    key = _key(expressions, ids, flags)
    if store is not None and (blob := store.load(key)) is not None:
        db = _loaded(blob)
        if db is not None:
            return db
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    try:
        db.compile(expressions=[e.encode() for e in expressions], ids=ids,
                   elements=len(expressions), flags=flags)
    except hyperscan.error:
        return None
    if store is not None:
        store.save(key, hyperscan.dumpb(db))
    return db


def _key(expressions: Sequence[str], ids: Sequence[int], flags: int) -> str:
    import hyperscan

    version = getattr(hyperscan, "__version__", "")  # the binding bundles the library
    made = [version, platform.machine(), flags, list(ids), list(expressions)]
    return hashlib.sha256(json.dumps(made).encode()).hexdigest()


def _loaded(blob: bytes) -> Any:
    """A stored database, or None when it is damaged or was built for another CPU (a home
    folder shared by different machines): Hyperscan checks both, the second when scanning."""
    import hyperscan

    try:
        db = hyperscan.loadb(blob, hyperscan.HS_MODE_BLOCK)
        db.scratch = hyperscan.Scratch(db)  # not kept with the database
        db.scan(b"\n", match_event_handler=_ignore)
    except hyperscan.error:
        return None
    return db


def _ignore(*_args: object) -> None:
    return None


def _compilable(forms: dict[int, str], fallback: Callable[[int], str],
                store: DatabaseStore | None = None, *,
                single: bool = False) -> tuple[dict[int, str], set[int], Any]:
    """The forms, as Hyperscan will take them: one it proves can never match is left out (it
    matches no line); one it refuses (an anchor after other items, the empty string, too
    large) becomes its `fallback`, else EVERY_LINE. Also the ids so widened, and the
    database of the forms kept (None when there are none, or they still fail together)."""
    if not forms:
        return forms, set(), None
    db = _compile(list(forms.values()), list(forms), single=single, store=store)
    if db is not None:
        return forms, set(), db
    kept: dict[int, str] = {}
    widened: set[int] = set()
    for pid, form in forms.items():
        error = _refusal(form)
        if error is None:
            kept[pid] = form
        elif "never match" not in error:
            wider = fallback(pid)
            kept[pid] = wider if _refusal(wider) is None else EVERY_LINE
            widened.add(pid)
    db = _compile(list(kept.values()), list(kept), single=single, store=store) if kept else None
    return kept, widened, db


def _refusal(form: str) -> str | None:
    import hyperscan

    try:
        hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK).compile(
            expressions=[form.encode()], flags=hyperscan.HS_FLAG_MULTILINE)
    except hyperscan.error as exc:
        return str(exc)
    return None


def try_build(rules: RuleSet,
              store: DatabaseStore | None = None) -> tuple[Prefilter | None, str]:
    """A prefilter for `rules`, or None and why not (the engine then reads line by line).
    Databases are taken from and kept in `store` when one is given."""
    try:
        import hyperscan  # noqa: F401
    except ImportError:
        return None, "not used: hyperscan is not installed (pip install hyperscan)"
    entries: list[_Entry] = []
    strict: dict[int, str] = {}
    noise: dict[int, str] = {}
    loose: list[str] = []
    for kind, rule, pattern in _entries(rules):
        try:
            forms = line_forms(pattern)
        except Untranslatable as exc:
            return None, f"not used: rule {rule.id}: {exc}"
        pid = len(entries)
        entries.append(_Entry(pid, kind, rule, regex.compile(pattern), forms.exact))
        loose.append(forms.loose)
        # Exact noise rules are told apart line by line, and only when it matters.
        (noise if kind == "noise" and forms.exact else strict)[pid] = forms.strict
    if len(entries) >= 0xFFFF:
        return None, "not used: too many rules"
    patterns = [pattern for _, _, pattern in _entries(rules)]

    def relaxed(pid: int) -> str:
        return line_forms(patterns[pid], anchors=False).strict

    # Noise rules Hyperscan refuses are widened and scanned for with the others.
    noise, widened_noise, _ = _compilable(noise, relaxed, store)
    for pid in widened_noise:
        strict[pid] = noise.pop(pid)
    strict[len(entries)] = r"[\x80-\xff][\x00-\x7f]"  # a line with other bytes: checked loosely
    strict, widened, db = _compilable(strict, relaxed, store)
    for pid in widened | widened_noise:  # regex confirms them on every line
        entries[pid] = dataclasses.replace(entries[pid], exact=False)
    if db is None:
        return None, "not used: hyperscan cannot compile the rules"
    exact = sum(e.exact for e in entries)
    status = f"hyperscan, {len(entries)} patterns ({exact} exact on ASCII lines)"
    if widened or widened_noise:
        status += f"; {len(widened | widened_noise)} widened where Hyperscan refused them"
    return Prefilter(rules, entries, db, noise, loose, status, store), status


def build_prefilter(rules: RuleSet, store: DatabaseStore | None = None) -> Prefilter | None:
    return try_build(rules, store)[0]
