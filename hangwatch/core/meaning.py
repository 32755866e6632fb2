"""What a line means, defined once.

Two finders list the rules a line hits: `RuleSet.match` searches every pattern with `regex`,
a line at a time; the block matcher (`core/prefilter.py`) lets Hyperscan name the lines and
patterns worth a look. Both number the rule set's patterns as `line_patterns` lists them and
hand the hits of a line to `line_meaning`, which alone says what they make: the kinds, the
rules of each kind a line takes, and which of a pack's and the generic layer's hits count.
`tests/core/test_line_meaning_contract.py` holds the two finders equal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from enum import Enum
from typing import Any, NamedTuple, Protocol

import regex

from hangwatch.core.model import FinishRule, NoiseRule, PhaseRule, ProgressRule, SignalRule


class HitKind(str, Enum):
    """A kind of line rule, in the order a line's hits are listed. The values are the
    spellings users read (`rules test`, its JSON)."""

    PHASE_START = "phase-start"
    PHASE_DONE = "phase-done"
    SIGNAL = "signal"
    NOISE = "noise"
    PROGRESS = "progress"
    FINISH = "finish"

    def __str__(self) -> str:
        return self.value


# Bound once: `line_meaning` runs for every line a rule hits.
_START, _DONE, _SIGNAL, _NOISE, _PROGRESS = (
    HitKind.PHASE_START, HitKind.PHASE_DONE, HitKind.SIGNAL, HitKind.NOISE, HitKind.PROGRESS)

# One rule a pattern found on a line: its progress rules' match feeds the counter, the other
# kinds' may be None (the block matcher knows them hit without asking `regex`).
Hit = tuple[HitKind, Any, "regex.Match[str] | None"]


class LineMatch(NamedTuple):
    """What a line means: every rule of it that counts, by kind. Progress rules carry their
    match for the counter/heartbeat test. A tuple: one is made for every line a rule hits,
    and tuples are the cheapest to make."""

    phase_starts: tuple[PhaseRule, ...] = ()
    phase_dones: tuple[PhaseRule, ...] = ()
    signals: tuple[SignalRule, ...] = ()
    noise: NoiseRule | None = None
    progress: tuple[tuple[ProgressRule, regex.Match[str]], ...] = ()
    finish: FinishRule | None = None

    def hits(self) -> Iterator[tuple[HitKind, Any]]:
        """(kind, rule) of every rule that counts, in kind order."""
        yield from ((HitKind.PHASE_START, r) for r in self.phase_starts)
        yield from ((HitKind.PHASE_DONE, r) for r in self.phase_dones)
        yield from ((HitKind.SIGNAL, r) for r in self.signals)
        if self.noise is not None:
            yield HitKind.NOISE, self.noise
        yield from ((HitKind.PROGRESS, r) for r, _ in self.progress)
        if self.finish is not None:
            yield HitKind.FINISH, self.finish


def line_meaning(hits: Sequence[Hit]) -> LineMatch | None:
    """What a line these rules hit means; None when none does (a plain line). Each kind's
    hits come in `line_patterns` order. A line a pack knows is the pack's: generic-layer hits
    count only on lines no pack rule hits (a pack's phase wins over a generic one, its noise
    silences generic words). A line takes one noise rule and one finish rule, the first that
    hits; every rule of the other kinds."""
    if not hits:
        return None
    generic = [hit[1].origin.generic for hit in hits]
    if any(generic) and not all(generic):
        hits = [hit for hit, layer in zip(hits, generic, strict=True) if not layer]
    starts: list[PhaseRule] = []
    dones: list[PhaseRule] = []
    signals: list[SignalRule] = []
    progress: list[Any] = []
    noise = finish = None
    for kind, rule, match in hits:
        if kind is _START:
            starts.append(rule)
        elif kind is _DONE:
            dones.append(rule)
        elif kind is _SIGNAL:
            signals.append(rule)
        elif kind is _PROGRESS:
            progress.append((rule, match))
        elif kind is _NOISE:
            noise = noise or rule
        else:
            finish = finish or rule
    return LineMatch(_waited_for(starts), tuple(dones), tuple(signals), noise,
                     tuple(progress), finish)


# What a job waits for that is a place of its own: a model shard, a dataset, a build, its
# peers. A wait to start training (`Attempting to start training worker group ... with the
# following resources`) is a wait for resources.
_WAITED_FOR = frozenset({"data_load", "model_load", "build", "distributed_init",
                         "checkpoint_save"})


def _waited_for(starts: list[PhaseRule]) -> tuple[PhaseRule, ...]:
    """A line that opens the generic layer's wait and one of its places a job waits for
    (`Waiting for shard 0 to be ready` is the model's load): that place is its meaning."""
    if len(starts) < 2 or not any(r.origin.generic and r.kind in _WAITED_FOR for r in starts):
        return tuple(starts)
    return tuple(r for r in starts if not (r.origin.generic and r.kind == "resource_wait"))


def noise_only(match: LineMatch) -> bool:
    """Only a noise rule counts on the line: it is output, neither progress nor an event."""
    return match.noise is not None and not (
        match.phase_starts or match.phase_dones or match.signals or match.progress
        or match.finish)


class LineRules(Protocol):
    """The line rules of a rule set (`RuleSet`), each kind in rule order."""

    @property
    def phases(self) -> Sequence[PhaseRule]: ...

    @property
    def signals(self) -> Sequence[SignalRule]: ...

    @property
    def noise(self) -> Sequence[NoiseRule]: ...

    @property
    def progress(self) -> Sequence[ProgressRule]: ...

    @property
    def finish(self) -> Sequence[FinishRule]: ...


def _pack_first(rules: Iterable[Any]) -> list[Any]:
    return sorted(rules, key=lambda rule: rule.origin.generic)


# Each kind's rules and patterns. Of the kinds a line takes one rule of, a pack's rules come
# before the generic layer's: the first that hits is then the one `line_meaning` keeps, and a
# finder may stop searching that kind at its first hit.
_PATTERNS: dict[HitKind, Callable[[LineRules], Iterator[tuple[Any, str]]]] = {
    HitKind.PHASE_START: lambda rules: ((p, p.start) for p in rules.phases),
    HitKind.PHASE_DONE: lambda rules: ((p, p.done) for p in rules.phases if p.done),
    HitKind.SIGNAL: lambda rules: ((s, s.match) for s in rules.signals),
    HitKind.NOISE: lambda rules: ((n, n.match) for n in _pack_first(rules.noise)),
    HitKind.PROGRESS: lambda rules: ((p, p.match) for p in rules.progress),
    HitKind.FINISH: lambda rules: ((f, f.match) for f in _pack_first(rules.finish)),
}
ONE_A_LINE = frozenset({HitKind.NOISE, HitKind.FINISH})  # kinds a line takes one rule of


def line_patterns(rules: LineRules) -> list[tuple[HitKind, Any, str]]:
    """(kind, rule, pattern) of every line pattern, in the order both finders list a line's
    hits: by kind in HitKind's order, then as `_PATTERNS` orders each kind's rules."""
    return [(kind, rule, pattern) for kind in HitKind
            for rule, pattern in _PATTERNS[kind](rules)]
