"""What `hangwatch rules test` counts of the lines it does not show: how many lines each rule
hits, by kind, read off the block matcher's flags (`core/prefilter.py`) where those are
exact, with `regex` searches only where they are not."""

from __future__ import annotations

import bisect
import itertools
from collections import Counter
from collections.abc import Callable
from typing import Any

from hangwatch.core.prefilter import PlainFinder, Prefilter, bits, line_match
from hangwatch.core.rules import LineMatch
from hangwatch.core.segments import QUIET

# See HitCounter.counts: lines hit by kind and rule, lines hit, lines to feed.
HitCounts = tuple[Counter[tuple[str, Any]], int, list[bytes]]
HitLines = tuple[list[tuple[int, bytes, LineMatch]], Counter[Any]]


class HitCounter:
    """A prefilter's answers for `rules test`, with what it learns of each set of flags
    kept (a block of a few kinds of lines asks the same questions millions of times)."""

    def __init__(self, prefilter: Prefilter) -> None:
        self._prefilter = prefilter
        self._noise = tuple(e for e in prefilter.entries if e.kind == "noise")
        # What `counts` takes of a line, by its flags (ASCII) or its patterns found.
        self._counts: dict[int, tuple[tuple[tuple[str, Any], ...], bool] | None] = {}
        self._keys_by_hits: dict[int, tuple[tuple[tuple[str, Any], ...], bool]] = {}

    def counts(self, data: bytes,
               unmatched: Callable[[bytes], bool] | None = None) -> HitCounts:
        """For `hangwatch rules test` on lines it does not show, a block of complete lines:
        how many lines each rule hits, by kind (as `RuleSet.match` reports them: one noise
        rule a line), how many lines some rule hits, and the lines a rule other than noise
        hits, in order. Lines no rule hits go to `unmatched`, in order, until it returns
        False. A line that only rules exact on it hit needs no `regex` search."""
        first_noise = self._first_noise(data)
        counts: Counter[tuple[str, Any]] = Counter()
        feed: list[bytes] = []
        finder = PlainFinder(self._prefilter, data)
        wanted, take = unmatched is not None, unmatched or (lambda _raw: False)
        flagged = self._prefilter.flagged(data)
        loose = self._loose_masks(data, [(s, e) for s, e, m in flagged
                                         if m >> self._prefilter.other_id & 1])
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
            if not mask >> self._prefilter.other_id & 1:
                known = self._counted(mask | (0 if noise is None
                                              else 1 << self._prefilter.noise_pids[noise]))
            elif loose is not None:
                known = self._confirmed(data[start:end], loose[start])
            if known is None:
                raw = data[start:end]
                match = self._full(raw, self._prefilter.candidates(raw, mask))
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
            counts[("noise", self._prefilter.entries[self._prefilter.noise_pids[i]].rule)] += 1
        return counts, hit + len(first_noise), feed

    def _counted(self, mask: int) -> tuple[tuple[tuple[str, Any], ...], bool] | None:
        """What `counts` takes of an ASCII line so flagged (exact noise included): the
        (kind, rule) pairs it counts and whether more than noise hits; None when a `regex`
        search must decide."""
        if mask not in self._counts:
            plan = self._prefilter.plan(mask, True)
            exact = all(e.exact for e in plan.search)  # progress rules: sure hits, uncounted
            hits = sum(1 << e.pid for e in (*(e for e, _ in plan.known), *plan.search))
            self._counts[mask] = self._keyed(hits) if exact else None
        return self._counts[mask]

    def _loose_masks(self, data: bytes, lines: list[tuple[int, int]]) -> dict[int, int] | None:
        """Line start -> the patterns whose loose forms hit it, for these lines (with bytes
        >= 0x80), found in one scan of them all; None when Hyperscan refused the forms."""
        if not lines:
            return {}
        db = self._prefilter.database("loose-all")
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
        """What `counts` takes of a line with other bytes whose loose forms `mask` hit:
        each of those patterns is searched for with `regex`."""
        text = raw.decode("utf-8", "replace")
        hits = 0
        prefilter = self._prefilter
        for pid in bits(mask):
            if pid < prefilter.other_id and prefilter.search(prefilter.entries[pid].pattern, text):
                hits |= 1 << pid
        return self._keyed(hits)

    def _keyed(self, hits: int) -> tuple[tuple[tuple[str, Any], ...], bool]:
        """The (kind, rule) pairs a line that these patterns hit counts, and whether more
        than noise hits it: as `_line_match`, and when only noise counts (a pack's noise
        outranks generic words), the first noise rule, as RuleSet.match says."""
        known = self._keys_by_hits.get(hits)
        if known is None:
            entries = [self._prefilter.entries[pid] for pid in bits(hits)]
            match = line_match([(e, None) for e in entries])
            if match is QUIET:
                match = LineMatch(noise=next(e.rule for e in entries if e.kind == "noise"))
            known = self._keys_by_hits[hits] = ((), False) if match is None else _keys(match)
        return known

    def lines(self, data: bytes, *, noise_lines: bool = True
              ) -> tuple[list[tuple[int, bytes, LineMatch]], Counter[Any]]:
        """For `hangwatch rules test`: every line of a block of complete lines that a rule
        hits, as (its index in the block, the line, what `RuleSet.match` says of it), noise
        included, in order. With `noise_lines=False`, lines that only exact noise rules hit
        (NCCL spew: most of a log, needing no detail) are not listed, only counted by rule."""
        flagged = self._prefilter.flagged(data)
        first_noise = self._first_noise(data)  # by line end, of the lines exact noise hits
        rows: list[tuple[int, int, LineMatch]] = []  # (line start, line end, match)
        for start, end, mask in flagged:
            match = self._full(data[start:end], self._prefilter.candidates(data[start:end], mask))
            if match is not None:
                rows.append((start, end, match))
            first_noise.pop(end, None)
        rules = [self._prefilter.entries[pid].rule for pid in self._prefilter.noise_pids]
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
        """Line end -> index in `Prefilter.noise_pids` of the first exact noise rule that hits the
        line, for the lines of pure ASCII (where those rules are exact) that they hit. Their
        order is the rules' order, and a noise rule that is not exact flags its line (so a
        line it hits is not taken from here)."""
        if not self._prefilter.noise_pids:
            return {}
        codes: list[int] = []
        add = codes.append

        def on_match(i: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            add(end << 16 | i)  # `[^\n]*$`: one report a line and rule, at the line's end

        self._prefilter.database("each-noise").scan(data, match_event_handler=on_match)
        codes.sort(reverse=True)  # the first rule of each line is the last one kept
        return {code >> 16: code & 0xFFFF for code in codes}

    def _full(self, raw: bytes, candidates: tuple[int, bool] | None) -> LineMatch | None:
        """What `RuleSet.match` says of a flagged line, with the noise rule a QUIET line hits."""
        text, match = self._prefilter.line(raw, candidates)
        if match is not QUIET:
            return match
        if candidates is None:
            return self._prefilter.rules.match(text)
        mask, strict = candidates
        if strict:
            mask |= self._prefilter.noise_mask(raw)
        rule = next((e.rule for e in self._noise if mask >> e.pid & 1
                     and ((strict and e.exact) or self._prefilter.search(e.pattern, text))), None)
        return None if rule is None else LineMatch(noise=rule)  # None: a search timed out


def _keys(match: LineMatch) -> tuple[tuple[tuple[str, Any], ...], bool]:
    """The (kind, rule) pairs a line's match counts, and whether more than noise hit it."""
    keys = (*(("done", r) for r in match.phase_dones),
            *(("start", r) for r in match.phase_starts),
            *(("signal", r) for r in match.signals),
            *(("progress", r) for r, _ in match.progress),
            *((("noise", match.noise),) if match.noise is not None else ()),
            *((("finish", match.finish),) if match.finish is not None else ()))
    return keys, match._replace(noise=None) != QUIET
