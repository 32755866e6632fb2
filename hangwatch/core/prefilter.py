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

Flags the translation cannot follow (verbose, full case folding, version 1 sets) make
`try_build` return None, and the engine matches line by line.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import json
import platform
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import regex

from hangwatch.core import rules as rules_module
from hangwatch.core.model import PhaseRule
from hangwatch.core.rules import LineMatch, RuleSet
from hangwatch.core.translate import EVERY_LINE, Untranslatable, line_forms


class DatabaseStore(Protocol):
    """Keeps compiled databases between runs (`hangwatch/prefilter_cache.py` on disk):
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
Segment = tuple[int, str, "LineMatch | Pending | Plain | None"]
QUIET = LineMatch()  # stands for "noise only": counted, neither progress nor an event
PROBE_LINES = 256  # lines tried one by one for the next plain line before finding all noise
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


class Held:
    """Pending lines set aside, by progress rule, oldest first."""

    def __init__(self, prefilter: Prefilter) -> None:
        self._prefilter = prefilter
        self._lines: dict[int, tuple[_Entry, list[bytes]]] = {}  # by pattern id

    def add(self, pending: Pending) -> None:
        for entry in pending.progress:
            self._lines.setdefault(entry.pid, (entry, []))[1].append(pending.raw)

    def release(self) -> Iterator[tuple[Any, Iterator[regex.Match[str]]]]:
        """For each progress rule (ProgressRule), the matches of its lines, newest first:
        the judge takes the first it can use. Empties the hold."""
        held, self._lines = self._lines, {}
        for entry, raws in held.values():
            yield entry.rule, self._prefilter.matches(entry, reversed(raws))


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

    def segments(self, data: bytes,
                 wants_plain: Callable[[], bool] = lambda: True) -> Iterator[Segment]:
        """The block, cut as `Segment` says; lazily, so that the engine can set Pending lines
        aside as it goes. While `wants_plain()` (the engine judges plain lines until one is
        progress), each plain line is a segment of its own; after that they are counted."""
        if not data:
            return
        if not data.endswith(b"\n"):
            data += b"\n"  # as line-by-line reading takes an unterminated last line
        flagged = self._scan(data)
        finder = _PlainFinder(self, data)
        lines = pos = 0
        for start, end, mask in [*flagged, (len(data), len(data), 0)]:
            while wants_plain() and (at := finder.next(pos, start)) is not None:
                lines += data.count(b"\n", pos, at)
                pos = data.index(b"\n", at) + 1
                yield lines, data[at:pos - 1].decode("utf-8", "replace"), PLAIN
                lines = 0
            lines += data.count(b"\n", pos, start)
            if start == len(data):
                break
            pos = end + 1
            raw = data[start:end]
            candidates = self._candidates(raw, mask)
            pending = self._pending(raw, candidates) if candidates is not None else None
            if pending is not None:
                yield lines, "", pending
                lines = 0
                continue
            text, match = self._line(raw, candidates)
            if match is None and wants_plain():  # flagged, but plain after all
                yield lines, text, PLAIN
                lines = 0
            elif match is not None and match is not QUIET:
                yield lines, text, match
                lines = 0
            else:
                lines += 1
        if lines:
            yield lines, "", None

    def resolve(self, pending: Pending) -> tuple[str, LineMatch | None]:
        """What RuleSet.match says of a Pending line (QUIET: noise only)."""
        return self._line(pending.raw, (pending.mask, pending.strict))

    def matches(self, entry: _Entry, raws: Iterable[bytes]) -> Iterator[regex.Match[str]]:
        """Where `entry`'s pattern matches these lines, skipping those it does not."""
        for raw in raws:
            found = self._search(entry.pattern, raw.decode("utf-8", "replace"))
            if found is not None:
                yield found

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

    def _scan(self, data: bytes) -> list[_Line]:
        """The lines some pattern (other than an exact noise rule) may hit, or with a byte
        >= 0x80, in order."""
        codes: list[int] = []
        add = codes.append

        def on_match(pid: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            add(end << 16 | pid)

        self._strict.scan(data, match_event_handler=on_match)
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
            else:
                _, _, db = _compilable(dict(enumerate(self._loose_forms)), self._relaxed,
                                       store, single=True)
                db = db or False
            self._lazy[name] = db
        return self._lazy[name]

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
    if any(e.rule.counter is not None and set(e.pattern.groupindex) - {e.rule.counter}
           for e in progress):
        return None
    return tuple(e.rule for e in entries if e.kind == "start"), progress


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
