"""Compile rule packs into one rule set and tell, for a line, which rules it hits."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

import regex

from hangwatch.core.model import (
    DiagnosisRule,
    FinishRule,
    NoiseRule,
    PhaseRule,
    ProgressRule,
    RankRule,
    RulePack,
    SignalRule,
)
from hangwatch.core.stackrules import StackRule
from hangwatch.errors import ConfigError, ConfigErrors

# A pathological pattern on a pathological line must not freeze the loop.
MATCH_TIMEOUT_S = 0.05
KINDS = ("phases", "signals", "noise", "progress", "finish", "diagnoses", "ranks")

R = TypeVar("R")


@dataclass(frozen=True)
class Compiled(Generic[R]):
    rule: R
    pattern: regex.Pattern[str]


class LineMatch(NamedTuple):
    """Every rule a line hits. Progress rules carry their match for the counter/heartbeat test.
    A tuple: one is made for every line a rule hits, and tuples are the cheapest to make."""

    phase_starts: tuple[PhaseRule, ...] = ()
    phase_dones: tuple[PhaseRule, ...] = ()
    signals: tuple[SignalRule, ...] = ()
    noise: NoiseRule | None = None
    progress: tuple[tuple[ProgressRule, regex.Match[str]], ...] = ()
    finish: FinishRule | None = None


class RuleSet:
    """The effective rules of several packs, in order; later user packs override by id."""

    def __init__(self, packs: Sequence[RulePack]) -> None:
        self.packs = tuple(packs)
        merged = _merge(self.packs)
        self.phases: tuple[PhaseRule, ...] = tuple(merged["phases"])
        self.signals: tuple[SignalRule, ...] = tuple(merged["signals"])
        self.noise: tuple[NoiseRule, ...] = tuple(merged["noise"])
        self.progress: tuple[ProgressRule, ...] = tuple(merged["progress"])
        self.finish: tuple[FinishRule, ...] = tuple(merged["finish"])
        self.diagnoses: tuple[DiagnosisRule, ...] = tuple(merged["diagnoses"])
        self.ranks: tuple[RankRule, ...] = tuple(merged["ranks"])  # rank prefixes of packs
        # Frame patterns, first match wins: a pack's own before the generic layer's.
        self.stack_rules: tuple[StackRule, ...] = tuple(
            rule for generic in (False, True) for pack in self.packs
            if pack.generic == generic for rule in pack.stack_rules)
        self._by_phase = {p.id: p for p in self.phases}
        self._by_signal = {s.id: s for s in self.signals}
        self._starts = [Compiled(p, regex.compile(p.start)) for p in self.phases]
        self._dones = [Compiled(p, regex.compile(p.done)) for p in self.phases if p.done]
        self._signals = [Compiled(s, regex.compile(s.match)) for s in self.signals]
        # A line takes one noise rule: a pack's before the generic layer's, which
        # `prefer_packs` would drop beside the pack's other hits on that line.
        self._noise = [Compiled(n, regex.compile(n.match))
                       for n in sorted(self.noise, key=lambda n: n.origin.generic)]
        self._progress = [Compiled(p, regex.compile(p.match)) for p in self.progress]
        self._finish = [Compiled(f, regex.compile(f.match)) for f in self.finish]
        self.timeouts = 0  # searches abandoned at MATCH_TIMEOUT_S
        self._start_of: dict[str, regex.Pattern[str]] | None = None
        self._by_pattern: dict[str, regex.Pattern[str]] | None = None

    def phase(self, phase_id: str) -> PhaseRule | None:
        return self._by_phase.get(phase_id)

    def signal(self, signal_id: str) -> SignalRule | None:
        return self._by_signal.get(signal_id)

    def start_pattern(self, phase: PhaseRule) -> regex.Pattern[str]:
        """The phase's START, compiled once (a pack may hold thousands of phases: more than
        `regex` keeps compiled on its own)."""
        if self._start_of is None:
            self._start_of = {c.rule.id: c.pattern for c in self._starts}
        found = self._start_of.get(phase.id)
        return found if found is not None and found.pattern == phase.start else regex.compile(
            phase.start)

    def compiled(self, pattern: str) -> regex.Pattern[str]:
        """A rule's pattern as this set compiled it (`regex` keeps 500 compiled patterns of
        its own, fewer than a start compiles: compiling again costs half a millisecond)."""
        if self._by_pattern is None:
            kinds: tuple[Sequence[Compiled[Any]], ...] = (
                self._starts, self._dones, self._signals, self._noise, self._progress,
                self._finish)
            self._by_pattern = {c.pattern.pattern: c.pattern for kind in kinds for c in kind}
        found = self._by_pattern.get(pattern)
        return found if found is not None else regex.compile(pattern)

    def patterns(self) -> Iterator[tuple[str, str, str]]:
        """(kind, rule id, pattern) for every line pattern: what a prefilter or grep must find."""
        for c in self._starts:
            yield "phase-start", c.rule.id, c.rule.start
        for c in self._dones:
            yield "phase-done", c.rule.id, c.pattern.pattern
        others: tuple[tuple[str, Sequence[Compiled[Any]]], ...] = (
            ("signal", self._signals), ("noise", self._noise), ("progress", self._progress),
            ("finish", self._finish))
        for kind, compiled in others:
            for other in compiled:
                yield kind, other.rule.id, other.pattern.pattern

    def match(self, text: str) -> LineMatch | None:
        """The rules `text` hits, or None for a plain line (which is progress)."""
        starts = tuple(c.rule for c in self._starts if self._search(c.pattern, text))
        dones = tuple(c.rule for c in self._dones if self._search(c.pattern, text))
        signals = tuple(c.rule for c in self._signals if self._search(c.pattern, text))
        noise = next((c.rule for c in self._noise if self._search(c.pattern, text)), None)
        progress = tuple(
            (c.rule, m) for c in self._progress if (m := self._search(c.pattern, text))
        )
        finish = next((c.rule for c in self._finish if self._search(c.pattern, text)), None)
        if not (starts or dones or signals or noise or progress or finish):
            return None
        return prefer_packs(LineMatch(starts, dones, signals, noise, progress, finish))

    def _search(self, pattern: regex.Pattern[str], text: str) -> regex.Match[str] | None:
        try:
            return pattern.search(text, timeout=MATCH_TIMEOUT_S)
        except TimeoutError:
            self.timeouts += 1
            return None


def _hits(match: LineMatch) -> tuple[Any, ...]:
    return (*match.phase_starts, *match.phase_dones, *match.signals,
            *(r for r, _ in match.progress),
            *(r for r in (match.noise, match.finish) if r is not None))


def prefer_packs(match: LineMatch) -> LineMatch:
    """A line a pack knows is the pack's: generic-layer hits count only on lines no pack
    rule hits (a pack's phase wins over a generic one, its noise silences generic words)."""
    hits = _hits(match)
    if all(r.origin.generic for r in hits) or not any(r.origin.generic for r in hits):
        return match
    return LineMatch(
        tuple(r for r in match.phase_starts if not r.origin.generic),
        tuple(r for r in match.phase_dones if not r.origin.generic),
        tuple(r for r in match.signals if not r.origin.generic),
        match.noise if match.noise is not None and not match.noise.origin.generic else None,
        tuple(hit for hit in match.progress if not hit[0].origin.generic),
        match.finish if match.finish is not None and not match.finish.origin.generic
        else None,
    )


def is_generic_only(match: LineMatch) -> bool:
    """Every hit of the line is the generic layer's (after `prefer_packs`)."""
    hits = _hits(match)
    return bool(hits) and all(r.origin.generic for r in hits)


def _check_parents(phases: Sequence[PhaseRule]) -> Iterator[ConfigError]:
    by_id = {p.id: p for p in phases}
    for phase in phases:
        if phase.parent is None:
            continue
        parent = by_id.get(phase.parent)
        problem = ("names no phase" if parent is None
                   else "is itself a step" if parent.parent is not None else None)
        if problem:
            yield ConfigError(f"`parent: {phase.parent}` {problem} (a step's parent is a "
                              f"pipeline phase)", file=phase.origin.file,
                              line=phase.origin.line, rule=phase.id)


def _merge(packs: Sequence[RulePack]) -> dict[str, list[Any]]:
    """Rules by kind, in pack order. A same-id rule replaces the earlier one in place when its
    pack is a user pack or extends the earlier pack; between built-in packs it is an error."""
    names = {p.name for p in packs}
    errors: list[ConfigError] = []
    for pack in packs:
        for parent in pack.extends:
            if parent not in names:
                errors.append(ConfigError(f"extends unknown pack {parent!r} (known: "
                                          f"{', '.join(sorted(names))})", file=pack.file))
    merged: dict[str, list[Any]] = {kind: [] for kind in KINDS}
    owner: dict[str, tuple[str, int, Any]] = {}  # id -> (kind, index, rule)
    for pack in packs:
        for kind in KINDS:
            for rule in getattr(pack, kind):
                previous = owner.get(rule.id)
                if previous is None:
                    owner[rule.id] = (kind, len(merged[kind]), rule)
                    merged[kind].append(rule)
                    continue
                prev_kind, index, prev_rule = previous
                may_override = not pack.builtin or prev_rule.origin.pack in pack.extends
                if prev_kind != kind or not may_override:
                    errors.append(ConfigError(
                        f"duplicate id {rule.id!r}: also a {prev_kind} rule in pack "
                        f"{prev_rule.origin.pack} ({prev_rule.origin})",
                        file=rule.origin.file, line=rule.origin.line, rule=rule.id))
                    continue
                merged[kind][index] = rule
                owner[rule.id] = (kind, index, rule)
    errors.extend(_check_parents(merged["phases"]))
    if errors:
        raise ConfigErrors(errors)
    return merged
