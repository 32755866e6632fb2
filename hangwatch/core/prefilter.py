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
from array import array
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import regex

from hangwatch.core import rules as rules_module
from hangwatch.core.databases import (
    DatabaseStore,
    compilable,
    compile_database,
    translations,
)
from hangwatch.core.meaning import Hit, HitKind, LineMatch, line_meaning
from hangwatch.core.model import PhaseRule
from hangwatch.core.rules import RuleSet
from hangwatch.core.segments import PLAIN, QUIET, Entry, Pending, Plain, Segment, Spans, quiet
from hangwatch.core.translate import EVERY_LINE, Untranslatable, line_forms

PROBE_LINES = 256  # lines tried one by one for the next plain line before finding all noise
FIRST_WINDOW = 8 << 10  # bytes scanned in full at a block's start: most show progress at once
STRETCH_WINDOW = 16 << 10  # bytes first scanned for STARTs between lines rare rules hit
# Once a block has shown progress, its START and kept progress hits are all listed from one
# scan, HITS_CHUNK bytes at a time, while a chunk holds no more than one a HIT_BYTES bytes.
HITS_CHUNK, HIT_BYTES = 64 << 10, 128
DENSE_PROBE = 32  # hits listed before the density of a chunk's start may end its scan
# After CLOSE_STOPS lines in a row that each came within CLOSE_BYTES of the one before (a
# phase a line: generated step markers), the next DENSE_SPAN bytes go line by line.
CLOSE_STOPS, CLOSE_BYTES, DENSE_SPAN = 4, 1 << 10, 64 << 10
BACK_WINDOW = 4 << 10  # bytes searched first, from the end, for a progress rule's newest line
_Line = tuple[int, int, int]  # start, end (its b"\n"), mask of pattern ids


@dataclass(frozen=True)
class _Plan:
    """What a line flagged with some set of patterns needs: the hits it is known to have,
    and the patterns `regex` must still search (progress rules, whose match feeds the
    counter, and patterns not exact on this kind of line)."""

    known: tuple[Hit, ...]  # in pattern order
    known_pids: tuple[int, ...]
    search: tuple[Entry, ...]
    fixed: LineMatch | None  # what the line means when no searched pattern matches
    progress_only: bool
    # (STARTs, progress entries) when a line so flagged may be Pending, else None
    defer: tuple[tuple[PhaseRule, ...], tuple[Entry, ...]] | None


class Prefilter:
    """Cuts a block of lines into segments that say, of every line, what `RuleSet.match`
    would; a plain line only matters as the block's first (see `Segment`). One thread at a
    time: Hyperscan's scratch space belongs to the database."""

    def __init__(self, rules: RuleSet, entries: Sequence[Entry], strict: Any,
                 noise: dict[int, str], loose: Sequence[str], status: str,
                 store: DatabaseStore | None = None,
                 narrow: Sequence[tuple[str, str]] = ()) -> None:
        """`narrow`: each pattern's narrow forms, strict and loose (`core/translate.py`)."""
        self.rules = rules
        self._store = store
        self.status = status
        self.entries = tuple(entries)
        self._strict = strict  # every pattern but the exact noise ones, over whole blocks
        self.other_id = len(entries)  # a byte >= 0x80: the line is checked loosely
        self._noise_forms = list(noise.values())  # exact noise rules, one line at a time
        self.noise_pids = list(noise)
        self._loose_forms = list(loose)  # every pattern, for lines with other bytes
        self._narrow_forms = list(narrow)
        self._patterns = [e.compiled.source for e in entries]
        self._lazy: dict[str, Any] = {}  # databases compiled when first needed
        self._plans: dict[tuple[int, bool], _Plan] = {}
        # Once a block has shown progress: the progress rules whose lines are set aside
        # whatever the state, the patterns looked for between rare lines (those and the
        # STARTs), and the rare ones (every other kind but noise, which then never matters).
        self._kept = frozenset(e.pid for e in entries if e.kind is HitKind.PROGRESS
                               and _single_valued(e))
        self._first_pids = [e.pid for e in entries
                            if e.kind is HitKind.PHASE_START or e.pid in self._kept]
        self._rare_pids = [e.pid for e in entries if e.pid not in self._kept
                           and e.kind not in (HitKind.PHASE_START, HitKind.NOISE)]

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
            yield Segment(lines, "", None)

    def _judged(self, data: bytes,
                wants_plain: Callable[[], bool]) -> Generator[Segment, None, tuple[int, int]]:
        """Segments from the block's start while `wants_plain()`, a line at a time, in
        windows that grow (most blocks show progress in their first lines). Returns where
        it stopped and the lines passed over since the last segment."""
        finder = PlainFinder(self, data)
        pos = lines = 0
        size = FIRST_WINDOW
        while pos < len(data) and wants_plain():
            end = data.index(b"\n", min(len(data), pos + size) - 1) + 1
            for start, stop, mask in [*self.flagged(data, pos, end), (end, end, 0)]:
                while (at := finder.next(pos, start)) is not None:
                    lines += data.count(b"\n", pos, at)
                    pos = data.index(b"\n", at) + 1
                    yield Segment(lines, data[at:pos - 1].decode("utf-8", "replace"), PLAIN)
                    lines = 0
                    if not wants_plain():
                        return pos, lines
                lines += data.count(b"\n", pos, start)
                if start == end:
                    break
                pos = stop + 1
                found = self._flagged(data[start:stop], mask, None, plain=True)
                if found is None:
                    lines += 1
                    continue
                yield Segment(lines, *found)
                lines = 0
                if not wants_plain():
                    return pos, lines
            pos, size = end, size * 8
        return pos, lines

    def _set_aside(self, data: bytes, pos: int, lines: int,
                   repeats_only: Callable[[PhaseRule], bool]) -> Generator[Segment, None, int]:
        """Segments of the block from `pos` on, once it has shown progress: the lines rare
        rules may hit, one by one, and what lies between them as `_stretch` cuts it."""
        if self._first_pids and not self.database("first"):  # refused: by flags alone
            return (yield from self._one_by_one(data, pos, len(data), lines, repeats_only))
        hits = _FirstHits(self, data, pos, len(data))
        for start, stop in [*self._rare(data, pos), (len(data), len(data))]:
            lines = yield from self._stretch(data, pos, start, lines, repeats_only, hits)
            if start == len(data):
                break
            pos = stop + 1
            lines = yield from self._alone(data, start, stop, lines, repeats_only)
        return lines

    def _stretch(self, data: bytes, pos: int, end: int, lines: int,
                 repeats_only: Callable[[PhaseRule], bool],
                 hits: _FirstHits) -> Generator[Segment, None, int]:
        """Lines `pos` to `end` of a block that has shown progress, which no rare rule hits:
        as Spans up to the first line a START that would change something may hit, that line
        on its own, and so on. Each window (read off `hits` where it can) grows while
        nothing stops it, and after a stop spans twice the distance to it (STRETCH_WINDOW at
        least); a run of stops close together goes line by line on the flags
        (`_one_by_one`), so that a stretch where every line starts a phase costs no more
        than one scan of it. Returns the lines passed over since the last segment."""
        size, close = STRETCH_WINDOW, 0
        while pos < end:
            if close >= CLOSE_STOPS:  # a phase a line or so: scans would cost more than lines
                high = end if end - pos <= DENSE_SPAN else data.index(
                    b"\n", pos + DENSE_SPAN - 1) + 1
                lines = yield from self._one_by_one(data, pos, high, lines, repeats_only)
                pos, size, close = high, STRETCH_WINDOW, 0
                continue
            high = end if end - pos <= size else data.index(b"\n", pos + size - 1) + 1
            stop, kept = hits.stop(pos, high, repeats_only)
            cut = high if stop is None else max(pos, data.rfind(b"\n", pos, stop - 1) + 1)
            spans = tuple(self.entries[pid] for pid, at in kept if at <= cut)
            lines += data.count(b"\n", pos, cut)
            if spans:
                yield Segment(lines, "", Spans(data, pos, cut, spans))
                lines = 0
            if stop is None:
                pos, size = high, size * 4
                continue
            size = max(STRETCH_WINDOW, 2 * (stop - pos))
            close = close + 1 if stop - pos < CLOSE_BYTES else 0
            pos = data.index(b"\n", stop - 1) + 1
            lines = yield from self._alone(data, cut, pos - 1, lines, repeats_only)
        return lines

    def _one_by_one(self, data: bytes, pos: int, end: int, lines: int,
                    repeats_only: Callable[[PhaseRule], bool]) -> Generator[Segment, None, int]:
        """The flagged lines from `pos` to `end`, judged by their flags alone where that
        suffices: those the engine would set aside are gathered into Spans, the others are
        segments of their own."""
        held: dict[int, Entry] = {}  # progress rules of the lines gathered since `pos`
        repeats: dict[int, bool] = {}  # by STARTs' tuple, until a segment moves the engine
        for start, stop, mask in self.flagged(data, pos, end):
            if not mask >> self.other_id & 1:  # pure ASCII: the flags are exact
                defer = self.plan(mask, True).defer
                if defer is not None:
                    repeat = repeats.get(id(defer[0]))
                    if repeat is None:
                        repeat = repeats[id(defer[0])] = all(map(repeats_only, defer[0]))
                    if repeat:
                        held.update((e.pid, e) for e in defer[1])
                        continue
            lines += data.count(b"\n", pos, start)
            if held:
                yield Segment(lines, "", Spans(data, pos, start, tuple(held.values())))
                lines, held = 0, {}
            pos = stop + 1
            lines = yield from self._alone(data, start, stop, lines, repeats_only, mask)
            repeats.clear()
        lines += data.count(b"\n", pos, end)
        if held:
            yield Segment(lines, "", Spans(data, pos, end, tuple(held.values())))
            lines = 0
        return lines

    def _alone(self, data: bytes, start: int, stop: int, lines: int,
               repeats_only: Callable[[PhaseRule], bool],
               mask: int | None = None) -> Generator[Segment, None, int]:
        """Line `data[start:stop]` (flagged with `mask`, else scanned alone) as a segment of
        its own after `lines` lines passed over, in a block that has shown progress; returns
        the lines passed over since."""
        raw = data[start:stop]
        found = self._flagged(raw, self._line_mask(raw) if mask is None else mask,
                              repeats_only, plain=False)
        if found is None:
            return lines + 1
        yield Segment(lines, *found)
        return 0

    def _first_kept(self, data: bytes, entry: Entry, at: int, high: int,
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

        self.database(f"one:{entry.pid}").scan(memoryview(data)[low:high],
                                                match_event_handler=on_match)
        done = -1
        for last in sorted(found):
            if last <= done:
                continue
            done = data.index(b"\n", last)
            mask = self._line_mask(data[data.rfind(b"\n", 0, last) + 1:done])
            defer = None if mask >> self.other_id & 1 else self.plan(mask, True).defer
            if defer is None or not all(map(repeats_only, defer[0])):
                return done + 1
        return None

    def _flagged(self, raw: bytes, mask: int, repeats_only: Callable[[PhaseRule], bool] | None,
                 plain: bool) -> tuple[str, LineMatch | Pending | Plain] | None:
        """What a flagged line is as a segment (text and match), or None when it is only
        counted (noise, or plain while the caller needs no plain line). A line the engine
        may set aside comes as Pending only where it would: once the block has shown
        progress (`repeats_only` given), when each of its STARTs repeats only. Any other is
        resolved here: most state changes, which the engine would resolve at once."""
        candidates = self.candidates(raw, mask)
        if repeats_only is not None and candidates is not None and candidates[0]:
            defer = self.plan(*candidates).defer
            if defer is not None and all(map(repeats_only, defer[0])):
                return "", Pending(raw, defer[1])
        text, match = self.line(raw, candidates)
        if match is None:
            return (text, PLAIN) if plain else None
        return None if match is QUIET else (text, match)

    def matches(self, entry: Entry,
                items: Iterable[bytes | Spans]) -> Iterator[regex.Match[str]]:
        """Where `entry`'s pattern matches these lines (a Spans: its lines newest first),
        skipping those it does not."""
        for item in items:
            raws = self._newest(entry, item) if isinstance(item, Spans) else (item,)
            for raw in raws:
                found = self.search(entry.pattern, raw.decode("utf-8", "replace"))
                if found is not None:
                    yield found

    def _newest(self, entry: Entry, spans: Spans) -> Iterator[bytes]:
        """The lines of `spans` that `entry`'s wider form hits, newest first: found in
        windows searched from the end, each larger than the one before, since the caller
        mostly wants one line."""
        data, end, size = spans.data, spans.end, BACK_WINDOW
        db = self.database(f"one:{entry.pid}")
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

    def flagged(self, data: bytes, low: int = 0, high: int | None = None) -> list[_Line]:
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

    def candidates(self, raw: bytes, mask: int) -> tuple[int, bool] | None:
        """The patterns that may hit a flagged line, and whether their strict forms (exact
        on ASCII lines, less the exact noise rules) found them; None when Hyperscan refused
        the loose forms a line with other bytes needs."""
        if not mask >> self.other_id & 1:
            return mask, True
        loose = self.database("loose")
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

        # The strict forms are supersets on lines of pure ASCII: most blocks are.
        db = self.database("rare-ascii" if data.isascii() else "rare")
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
        progress rules that the engine may set aside (`_kept`): each reports once a scan,
        whatever the number of its lines."""
        firsts: dict[int, int] = {}

        def on_match(pid: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            firsts.setdefault(pid, low + end)

        if self._first_pids:
            self.database("first").scan(memoryview(data)[low:high],
                                         match_event_handler=on_match)
        return firsts

    def line(self, raw: bytes,
             candidates: tuple[int, bool] | None) -> tuple[str, LineMatch | None]:
        """What a flagged line means, QUIET when only noise counts on it."""
        text, found = self.meaning(raw, candidates)
        return text, quiet(found)

    def meaning(self, raw: bytes,
                candidates: tuple[int, bool] | None) -> tuple[str, LineMatch | None]:
        """What a flagged line means (`core/meaning.py`), as `RuleSet.match` says it."""
        text = raw.decode("utf-8", "replace")
        if candidates is None:  # ask every rule
            return text, self.rules.match(text)
        mask, strict = candidates
        if strict:
            mask |= self.noise_mask(raw)
        return text, self._confirm(text, mask, strict=strict)

    def match(self, text: str) -> LineMatch | None:
        """What one line means, as `RuleSet.match` says, searching only the patterns the
        databases say may hit it (so a start compiles no others)."""
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: no bytes read back as this text
            return self.rules.match(text)
        return self.meaning(raw, self.candidates(raw, self._line_mask(raw)))[1]

    def noise_mask(self, raw: bytes) -> int:
        """Pattern ids of the exact noise rules that hit an ASCII line."""
        if not self._noise_forms:
            return 0
        hits = 0
        pids = self.noise_pids

        def on_match(i: int, _start: int, _end: int, _flags: int, _ctx: object) -> None:
            nonlocal hits
            hits |= 1 << pids[i]

        self.database("probe").scan(raw + b"\n", match_event_handler=on_match)
        return hits

    def warm(self) -> None:
        """Compile now the databases reading a log needs, which are otherwise compiled when
        first needed: a watch started before its job then keeps up from the job's first line
        even when the compiled databases are not in the cache yet (a few seconds)."""
        names = ["rare", "rare-ascii", "first", "every-first", "loose", "probe"]
        for name in names + [f"one:{pid}" for pid in self._first_pids]:
            self.database(name)

    def database(self, name: str) -> Any:
        if name not in self._lazy:
            store = self._store
            if name == "probe":
                db = compile_database(self._noise_forms, single=True, store=store)
            elif name == "each-noise":
                db = compile_database([f"(?:{form})[^\\n]*$" for form in self._noise_forms],
                              store=store)
            elif name == "count":
                db = compile_database([f"(?:{'|'.join(self._noise_forms)})[^\\n]*$"], store=store)
            elif name in ("first", "every-first"):  # first: each pattern reports once
                forms = {pid: self._loose_forms[pid] for pid in self._first_pids}
                db = compilable(forms, self._relaxed, store, single=name == "first")[2]
                db = db or False
            elif name in ("rare", "rare-ascii"):
                db = self._narrow(name == "rare-ascii")
            elif name.startswith("one:"):
                db = self._wide([int(name[4:])])
            else:  # "loose" (each pattern once a scan, for one line) or "loose-all"
                _, _, db = compilable(dict(enumerate(self._loose_forms)), self._relaxed,
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
        db = compilable(forms, self._relaxed, self._store)[2]
        return db or compile_database([EVERY_LINE], [pids[0]], store=self._store)

    def _relaxed(self, pid: int) -> str:
        return line_forms(self._patterns[pid], anchors=False).loose

    def _narrow(self, ascii_only: bool) -> Any:
        """The rare database: the narrow forms of the rare rules (`core/translate.py`), which
        hit every line they hit; for blocks of pure ASCII the strict ones, else the loose
        ones. Those Hyperscan refuses are widened as `compilable` says; should the whole set
        still fail, the wide forms are scanned for."""
        pids = self._rare_pids
        if not pids:
            return False

        def relaxed(pid: int) -> str:
            forms = line_forms(self._patterns[pid], anchors=False)
            return forms.narrow_strict if ascii_only else forms.narrow_loose

        db = compilable({pid: self._narrow_forms[pid][0 if ascii_only else 1] for pid in pids},
                        relaxed, self._store)[2]
        return db or self._wide(pids)

    def _confirm(self, text: str, mask: int, strict: bool) -> LineMatch | None:
        """What a line so flagged means: the patterns known to hit it, and those `regex`
        finds of the ones it must search."""
        plan = self.plan(mask, strict)
        if not plan.search:
            return plan.fixed
        if plan.progress_only:  # the known hits keep their order: no progress is among them
            progress = [(e.kind, e.rule, m) for e in plan.search
                        if (m := self.search(e.pattern, text)) is not None]
            return line_meaning((*plan.known, *progress)) if progress else plan.fixed
        found = [(e.pid, (e.kind, e.rule, m)) for e in plan.search
                 if (m := self.search(e.pattern, text)) is not None]
        if not found:
            return plan.fixed
        hits = sorted([*zip(plan.known_pids, plan.known, strict=True), *found],
                      key=lambda hit: hit[0])
        return line_meaning([hit for _, hit in hits])

    def plan(self, mask: int, strict: bool) -> _Plan:
        """The plan for lines so flagged, made once."""
        plan = self._plans.get((mask, strict))
        if plan is not None:
            return plan
        entries = [self.entries[pid] for pid in bits(mask) if pid < self.other_id]
        if strict and any(e.exact and not e.rule.origin.generic for e in entries):
            # A pack rule surely hits the line: the generic layer's hits would not count.
            entries = [e for e in entries if not e.rule.origin.generic]
        search = tuple(e for e in entries
                       if e.kind is HitKind.PROGRESS or not (strict and e.exact))
        known = tuple(e for e in entries if e not in search)
        hits: tuple[Hit, ...] = tuple((e.kind, e.rule, None) for e in known)
        # A progress hit beside generic ones decides which of them count: the full path.
        progress_only = all(e.kind is HitKind.PROGRESS for e in search) and not any(
            e.rule.origin.generic for e in entries)
        plan = _Plan(hits, tuple(e.pid for e in known), search, line_meaning(hits),
                     progress_only, _deferrable(entries))
        self._plans[(mask, strict)] = plan
        return plan

    def search(self, pattern: regex.Pattern[str], text: str) -> regex.Match[str] | None:
        try:
            return pattern.search(text, timeout=rules_module.MATCH_TIMEOUT_S)
        except TimeoutError:
            self.rules.timeouts += 1
            return None


class _FirstHits:
    """The first hits of the windows of a block's stretches. Windows overlap (each
    runs past the stop it finds, and the next starts there: twice the bytes of a per-step
    log were scanned, at a state change every 4 KB), so where hits are few, every hit of the
    STARTs and kept progress rules is listed from one scan of the block, a chunk at a time,
    and a window's firsts are read off that list. A chunk with more hits than one a
    HIT_BYTES bytes (a progress bar on every line) ends the list: windows past it are
    scanned one by one, each pattern reported once, whatever the number of its lines."""

    def __init__(self, prefilter: Prefilter, data: bytes, low: int, high: int) -> None:
        self._prefilter = prefilter
        self._data = data
        self._high = high
        self._known = low  # every hit that ends by here is listed
        # Where each hit ends, in order, and its pattern: arrays, 10 bytes a hit (ints in a
        # list take 36), as a block may hold one a 128 bytes.
        self._ends = array("q")
        self._pids = array("H")
        self._every = prefilter.database("every-first")
        self._dense = not self._every

    def stop(self, low: int, high: int, repeats_only: Callable[[PhaseRule], bool]
             ) -> tuple[int | None, list[tuple[int, int]]]:
        """Where the first START from `low` to `high` that would change something ends its
        line's scan (the end of its hit; for a generic START, of the first line where it
        counts: `Prefilter._first_kept`), None if none does; and the kept progress rules
        hit before it, by their first hit, in its order. Read off the list, the hits are
        taken in order until one lies past the stop found; else from a scan of the window
        that reports each pattern once."""
        while not self._dense and self._known < high:
            self._scan()
        prefilter, data = self._prefilter, self._data
        entries, kept_pids = prefilter.entries, prefilter._kept
        if high > self._known:
            hits: Iterable[tuple[int, int]] = sorted(
                prefilter._firsts(data, low, high).items(), key=lambda item: item[1])
        else:
            ends = self._ends
            first, last = bisect.bisect_right(ends, low), bisect.bisect_right(ends, high)
            # Slices of the arrays, zipped: C, where a generator indexing them costs a step a hit.
            hits = zip(self._pids[first:last], ends[first:last], strict=True)
        best: int | None = None
        kept: list[tuple[int, int]] = []
        seen: set[int] = set()
        for pid, at in hits:
            if best is not None and at >= best:
                break  # a stop ends no earlier than its first hit
            if pid in seen:
                continue
            seen.add(pid)
            if pid in kept_pids:
                kept.append((pid, at))
                continue
            entry = entries[pid]
            if repeats_only(entry.rule):
                continue
            found = (prefilter._first_kept(data, entry, at, high, repeats_only)
                     if entry.rule.origin.generic else at)
            if found is not None and (best is None or found < best):
                best = found
        return best, kept

    def _scan(self) -> None:
        """The hits of the next chunk, listed unless there are too many."""
        import hyperscan  # present: the database to scan with was built by it

        data, low = self._data, self._known
        high = (self._high if self._high - low <= HITS_CHUNK
                else data.index(b"\n", low + HITS_CHUNK - 1) + 1)
        codes: list[int] = []
        add = codes.append

        def on_match(pid: int, _start: int, end: int, _flags: int, _ctx: object) -> bool:
            add((low + end) << 16 | pid)
            # A chunk dense from its start stops the scan at once, rather than calling back
            # for every hit of a list that will not be kept (a line a hit: 500 calls a chunk).
            return len(codes) > DENSE_PROBE and len(codes) * HIT_BYTES > end

        try:
            self._every.scan(memoryview(data)[low:high], match_event_handler=on_match)
        except hyperscan.ScanTerminated:
            self._dense = True
            return
        if len(codes) * HIT_BYTES > high - low:
            self._dense = True
            return
        codes.sort()
        # Lists, not generators: a generator is resumed for each hit, two steps a hit.
        self._ends.extend([code >> 16 for code in codes])
        self._pids.extend([code & 0xFFFF for code in codes])
        self._known = high


class PlainFinder:
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
            return bool(self._prefilter.noise_mask(self._data[pos:end]))
        if self._noisy is None:
            noisy: list[int] = []
            add = noisy.append

            def on_match(_pid: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
                add(end)  # the pattern ends in `[^\n]*$`: one report a line, at its end

            self._prefilter.database("count").scan(self._data, match_event_handler=on_match)
            noisy.sort()
            self._noisy = noisy
        i = bisect.bisect_left(self._noisy, end)
        return i < len(self._noisy) and self._noisy[i] == end


def bits(mask: int) -> Iterator[int]:
    """The positions of the bits set in `mask`, lowest first: as many steps as bits."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


_DEFERRABLE = (HitKind.PHASE_START, HitKind.PROGRESS, HitKind.NOISE)


def _deferrable(entries: list[Entry]) -> tuple[tuple[PhaseRule, ...], tuple[Entry, ...]] | None:
    """(STARTs, progress entries) of a line these entries may hit, when it could be Pending:
    no DONE, signal or finish rule among them, and every progress rule one whose memory is
    a single value (a heartbeat, or a counter with no other named group to key it)."""
    if any(e.kind not in _DEFERRABLE for e in entries):
        return None
    progress = tuple(e for e in entries if e.kind is HitKind.PROGRESS)
    if not all(_single_valued(e) for e in progress):
        return None
    return tuple(e.rule for e in entries if e.kind is HitKind.PHASE_START), progress


def _single_valued(entry: Entry) -> bool:
    """A progress rule whose memory is a single value: a heartbeat, or a counter with no
    other named group to key it (so only its newest line matters)."""
    rule = entry.rule
    return rule.counter is None or not set(entry.pattern.groupindex) - {rule.counter}


def try_build(rules: RuleSet,
              store: DatabaseStore | None = None) -> tuple[Prefilter | None, str]:
    """A prefilter for `rules`, or None and why not (the engine then reads line by line).
    Databases are taken from and kept in `store` when one is given."""
    try:
        import hyperscan  # noqa: F401
    except ImportError:
        return None, "not used: hyperscan is not installed (pip install hyperscan)"
    entries: list[Entry] = []
    strict: dict[int, str] = {}
    noise: dict[int, str] = {}
    loose: list[str] = []
    narrow: list[tuple[str, str]] = []
    found = list(rules.line_rules())  # numbered in the order a line's hits are listed
    patterns = [compiled.source for _, compiled in found]
    try:
        forms_of = translations(patterns, store)
    except Untranslatable:
        for (_, compiled), pattern in zip(found, patterns, strict=True):
            try:  # name the first rule that cannot be followed
                line_forms(pattern)
            except Untranslatable as exc:
                return None, f"not used: rule {compiled.rule.id}: {exc}"
        raise
    for (kind, compiled), forms in zip(found, forms_of, strict=True):
        pid = len(entries)
        entries.append(Entry(pid, kind, compiled, forms.exact))
        loose.append(forms.loose)
        narrow.append((forms.narrow_strict, forms.narrow_loose))
        # Exact noise rules are told apart line by line, and only when it matters.
        (noise if kind is HitKind.NOISE and forms.exact else strict)[pid] = forms.strict
    if len(entries) >= 0xFFFF:
        return None, "not used: too many rules"

    def relaxed(pid: int) -> str:
        return line_forms(patterns[pid], anchors=False).strict

    # Noise rules Hyperscan refuses are widened and scanned for with the others.
    noise, widened_noise, _ = compilable(noise, relaxed, store)
    for pid in widened_noise:
        strict[pid] = noise.pop(pid)
    strict[len(entries)] = r"[\x80-\xff][\x00-\x7f]"  # a line with other bytes: checked loosely
    strict, widened, db = compilable(strict, relaxed, store)
    for pid in widened | widened_noise:  # regex confirms them on every line
        entries[pid] = dataclasses.replace(entries[pid], exact=False)
    if db is None:
        return None, "not used: hyperscan cannot compile the rules"
    exact = sum(e.exact for e in entries)
    status = f"hyperscan, {len(entries)} patterns ({exact} exact on ASCII lines)"
    if widened or widened_noise:
        status += f"; {len(widened | widened_noise)} widened where Hyperscan refused them"
    return Prefilter(rules, entries, db, noise, loose, status, store, narrow), status


def build_prefilter(rules: RuleSet, store: DatabaseStore | None = None) -> Prefilter | None:
    return try_build(rules, store)[0]
