"""What `hangwatch rules test` counts of the lines it does not show: how many lines each rule
hits, by kind, read off the block matcher's flags (`core/prefilter.py`) where those are
exact, with `regex` searches only where they are not."""

from __future__ import annotations

import bisect
import itertools
from collections import Counter
from collections.abc import Callable
from typing import Any

from hangwatch.core.meaning import HitKind, LineMatch, line_meaning
from hangwatch.core.prefilter import PlainFinder, Prefilter, bits

# See HitCounter.counts: lines hit by kind and rule, lines hit, lines to feed.
HitCounts = tuple[Counter[tuple[HitKind, Any]], int, list[bytes]]
Keys = tuple[tuple[tuple[HitKind, Any], ...], bool]  # see `_keys`
HitLines = tuple[list[tuple[int, bytes, LineMatch]], Counter[Any]]


class HitCounter:
    """A prefilter's answers for `rules test`, with what it learns of each set of flags
    kept (a block of a few kinds of lines asks the same questions millions of times)."""

    def __init__(self, prefilter: Prefilter) -> None:
        self._prefilter = prefilter
        # What `counts` takes of a line, by its flags (ASCII) or its patterns found.
        self._counts: dict[int, Keys | None] = {}
        self._keys_by_hits: dict[int, Keys] = {}

    def counts(self, data: bytes,
               unmatched: Callable[[bytes], bool] | None = None) -> HitCounts:
        """For `hangwatch rules test` on lines it does not show, a block of complete lines:
        how many lines each rule hits, by kind (as `RuleSet.match` reports them: one noise
        rule a line), how many lines some rule hits, and the lines a rule other than noise
        hits, in order. Lines no rule hits go to `unmatched`, in order, until it returns
        False. A line that only rules exact on it hit needs no `regex` search."""
        first_noise = self._first_noise(data)
        counts: Counter[tuple[HitKind, Any]] = Counter()
        feed: list[bytes] = []
        finder = PlainFinder(self._prefilter, data)
        wanted, take = unmatched is not None, unmatched or (lambda _raw: False)
        flagged = self._prefilter.flagged(data)
        loose = self._loose_masks(data, [(s, e) for s, e, m in flagged
                                         if m >> self._prefilter.other_id & 1])
        seen: dict[int, tuple[tuple[tuple[HitKind, Any], ...], int]] = {}  # keys (cached), lines
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
                match = self._prefilter.meaning(raw, self._prefilter.candidates(raw, mask))[1]
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
            counts[(HitKind.NOISE,
                    self._prefilter.entries[self._prefilter.noise_pids[i]].rule)] += 1
        return counts, hit + len(first_noise), feed

    def _counted(self, mask: int) -> Keys | None:
        """What `counts` takes of an ASCII line so flagged (exact noise included): the
        (kind, rule) pairs it counts and whether more than noise hits; None when a `regex`
        search must decide."""
        if mask not in self._counts:
            plan = self._prefilter.plan(mask, True)
            exact = all(e.exact for e in plan.search)  # progress rules: sure hits, uncounted
            hits = sum(1 << pid for pid in (*plan.known_pids, *(e.pid for e in plan.search)))
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

    def _confirmed(self, raw: bytes, mask: int) -> Keys:
        """What `counts` takes of a line with other bytes whose loose forms `mask` hit:
        each of those patterns is searched for with `regex`."""
        text = raw.decode("utf-8", "replace")
        hits = 0
        prefilter = self._prefilter
        for pid in bits(mask):
            if pid < prefilter.other_id and prefilter.search(prefilter.entries[pid].pattern, text):
                hits |= 1 << pid
        return self._keyed(hits)

    def _keyed(self, hits: int) -> Keys:
        """The (kind, rule) pairs a line that these patterns hit counts, and whether more
        than noise hits it: what the line means (`core/meaning.py`)."""
        known = self._keys_by_hits.get(hits)
        if known is None:
            entries = [self._prefilter.entries[pid] for pid in bits(hits)]
            match = line_meaning([(e.kind, e.rule, None) for e in entries])
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
            raw = data[start:end]
            match = self._prefilter.meaning(raw, self._prefilter.candidates(raw, mask))[1]
            if match is not None:
                rows.append((start, end, match))
            first_noise.pop(end, None)
        rules = [self._prefilter.entries[pid].rule for pid in self._prefilter.noise_pids]
        noise: Counter[Any] = Counter()
        if noise_lines:  # each means its first noise rule (`core/meaning.py`): no other hits it
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
        order is `line_patterns`' (a pack's before the generic layer's), and a noise rule that
        is not exact flags its line (so a line it hits is not taken from here)."""
        if not self._prefilter.noise_pids:
            return {}
        codes: list[int] = []
        add = codes.append

        def on_match(i: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            add(end << 16 | i)  # `[^\n]*$`: one report a line and rule, at the line's end

        self._prefilter.database("each-noise").scan(data, match_event_handler=on_match)
        codes.sort(reverse=True)  # the first rule of each line is the last one kept
        return {code >> 16: code & 0xFFFF for code in codes}


def _keys(match: LineMatch) -> Keys:
    """The (kind, rule) pairs a line's match counts, and whether more than noise hit it."""
    keys = tuple(match.hits())
    return keys, any(kind is not HitKind.NOISE for kind, _ in keys)
