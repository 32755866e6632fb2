"""Compile rule packs into one rule set and tell, for a line, which rules it hits."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Generic, TypeVar

import regex

from hangwatch.core.meaning import ONE_A_LINE, Hit, HitKind, LineMatch, line_meaning, line_patterns
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
# The sections of a pack, merged by id (the kinds of rule a line hits: core/meaning.HitKind).
KINDS = ("phases", "signals", "noise", "progress", "finish", "diagnoses", "ranks")

R = TypeVar("R")


class Compiled(Generic[R]):
    """A rule's pattern, compiled when first searched: a start compiles only what its log
    needs (`regex` takes a few tenths of a millisecond a pattern, and the built-in packs
    hold over 800, most of which a given log never wakes)."""

    __slots__ = ("_pattern", "rule", "source")

    def __init__(self, rule: R, source: str) -> None:
        self.rule = rule
        self.source = source
        self._pattern: regex.Pattern[str] | None = None

    @property
    def pattern(self) -> regex.Pattern[str]:
        found = self._pattern
        if found is None:
            found = self._pattern = regex.compile(self.source)
        return found


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
        # Each kind's patterns compiled, as `core/meaning.py` orders them, and whether a line
        # takes only its first hit of that kind.
        groups: dict[HitKind, list[Compiled[Any]]] = {kind: [] for kind in HitKind}
        for kind, rule, pattern in line_patterns(self):
            groups[kind].append(Compiled(rule, pattern))
        self._groups = tuple((kind, tuple(compiled), kind in ONE_A_LINE)
                             for kind, compiled in groups.items() if compiled)
        self.timeouts = 0  # searches abandoned at MATCH_TIMEOUT_S
        self._by_pattern: dict[str, Compiled[Any]] | None = None

    def phase(self, phase_id: str) -> PhaseRule | None:
        return self._by_phase.get(phase_id)

    def signal(self, signal_id: str) -> SignalRule | None:
        return self._by_signal.get(signal_id)

    def start_pattern(self, phase: PhaseRule) -> regex.Pattern[str]:
        """The phase's START, compiled once (a pack may hold thousands of phases: more than
        `regex` keeps compiled on its own)."""
        return self.compiled(phase.start)

    def compiled(self, pattern: str) -> regex.Pattern[str]:
        """A rule's pattern as this set compiled it (`regex` keeps 500 compiled patterns of
        its own, fewer than a start compiles: compiling again costs half a millisecond)."""
        if self._by_pattern is None:
            self._by_pattern = {c.source: c for _, c in self.line_rules()}
        found = self._by_pattern.get(pattern)
        return found.pattern if found is not None else regex.compile(pattern)

    def line_rules(self) -> Iterator[tuple[HitKind, Compiled[Any]]]:
        """(kind, rule with its pattern) of every line pattern, in the order a line's hits
        are listed (`core/meaning.py`): what the block matcher numbers and scans for."""
        for kind, compiled, _ in self._groups:
            for c in compiled:
                yield kind, c

    def patterns(self) -> Iterator[tuple[HitKind, str, str]]:
        """(kind, rule id, pattern) for every line pattern: what a prefilter or grep must find."""
        for kind, c in self.line_rules():
            yield kind, c.rule.id, c.source

    def match(self, text: str) -> LineMatch | None:
        """What `text` means (`core/meaning.py`), or None for a plain line (which is
        progress). Of the kinds a line takes one rule of, only the first hit is searched for."""
        hits: list[Hit] = []
        for kind, compiled, first_only in self._groups:
            for c in compiled:
                found = self._search(c.pattern, text)
                if found is not None:
                    hits.append((kind, c.rule, found))
                    if first_only:
                        break
        return line_meaning(hits) if hits else None

    def _search(self, pattern: regex.Pattern[str], text: str) -> regex.Match[str] | None:
        try:
            return pattern.search(text, timeout=MATCH_TIMEOUT_S)
        except TimeoutError:
            self.timeouts += 1
            return None


def is_generic_only(match: LineMatch) -> bool:
    """Every rule that counts on the line is the generic layer's."""
    hits = [rule for _, rule in match.hits()]
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
