"""The two finders of what a line means, as tests drive them: the `regex` line-by-line
matcher (`RuleSet.match`, an engine with no prefilter) and the Hyperscan block matcher
(`core/prefilter.py`). Each says what lines mean and what events a log gives, so that one
set of cases runs against both (tests/core/test_line_meaning_contract.py)."""

from __future__ import annotations

import dataclasses
import importlib.util
from collections import Counter

import pytest
import regex

from hangwatch.core.clock import FakeClock
from hangwatch.core.engine import Engine
from hangwatch.core.events import StallEvent
from hangwatch.core.hitcounts import HitCounter
from hangwatch.core.lines import LineSplitter
from hangwatch.core.meaning import LineMatch, noise_only
from hangwatch.core.model import NoiseRule, Origin, PhaseRule, ProgressRule, RulePack, SignalRule
from hangwatch.core.prefilter import Prefilter, build_prefilter
from hangwatch.core.progress import ProgressJudge
from hangwatch.core.rules import RuleSet
from hangwatch.core.segments import PLAIN, QUIET, Pending

# The block matcher needs Hyperscan (where it has wheels); the tests that need it skip
# without it, so that the line-by-line matcher is still tested.
FINDERS = ("regex", pytest.param("hyperscan", marks=pytest.mark.skipif(
    importlib.util.find_spec("hyperscan") is None, reason="hyperscan is not installed")))


def block_matcher(rules: RuleSet) -> Prefilter:
    """The block matcher for `rules` (the test skips without Hyperscan)."""
    pytest.importorskip("hyperscan")
    prefilter = build_prefilter(rules)
    assert prefilter is not None
    return prefilter


def described(match: LineMatch | None) -> str:
    """A line's meaning in words: "plain", or each rule that counts, in kind order, as
    "kind id"; a progress rule with its match's named groups, else the text it matched."""
    if match is None:
        return "plain"
    found = dict(match.progress)
    parts = []
    for kind, rule in match.hits():
        part = f"{kind} {rule.id}"
        if rule in found:
            groups = " ".join(f"{k}={v}" for k, v in found[rule].groupdict().items())
            part += f" {groups or repr(found[rule].group())}"
        parts.append(part)
    return ", ".join(parts)


def meanings(finder: str, rules: RuleSet, lines: list[bytes],
             prefilter: Prefilter | None = None) -> list[str]:
    """What each line means, as `finder` finds it (`described`)."""
    if finder == "regex":
        return [described(rules.match(line.decode("utf-8", "replace"))) for line in lines]
    return block_meanings(prefilter or block_matcher(rules), lines)


def block_meanings(prefilter: Prefilter, lines: list[bytes]) -> list[str]:
    """What the block matcher says each line means, read as `rules test` lists a block's
    lines; and it must say the same when it counts them, of each line alone, when it cuts it
    as a segment for the engine (which is told no more than "noise" of a line only noise
    counts on), and of each line read again alone (`Prefilter.match`, the engine's tails)."""
    data = b"".join(line + b"\n" for line in lines)
    counter = HitCounter(prefilter)
    listed, _noise = counter.lines(data)
    found = ["plain"] * len(lines)
    counted: Counter[tuple[object, object]] = Counter()
    for index, _raw, match in listed:
        found[index] = described(match)
        counted.update(match.hits())
    counts, matched, _feed = counter.counts(data)
    assert (counts, matched) == (counted, len(listed))
    by_index = {index: match for index, _, match in listed}
    engine_view = ["plain" if (m := by_index.get(n)) is None else "noise" if noise_only(m)
                   else m for n in range(len(lines))]
    assert comparable(verdicts(prefilter, lines)) == comparable(engine_view)
    assert [described(prefilter.match(line.decode("utf-8", "replace"))) for line in lines] == found
    return found


def verdicts(prefilter: Prefilter, lines: list[bytes]) -> list[object]:
    """What the prefilter says of each line alone: "plain", "noise" or the LineMatch."""
    out: list[object] = []
    for line in lines:
        [(count, _text, match)] = prefilter.segments(line + b"\n")
        if match is PLAIN:
            assert count == 0
            out.append("plain")
        elif isinstance(match, Pending):  # what the engine asks when it cannot set it aside
            assert count == 0
            _text, found = prefilter.resolve(match)
            out.append("plain" if found is None else "noise" if found is QUIET else found)
        elif match is not None:
            assert count == 0
            out.append(match)
        else:
            assert count == 1
            out.append("noise")
    return out


def expected(rules: RuleSet, lines: list[bytes]) -> list[object]:
    """What line-by-line matching says of each line, in the terms of `verdicts`."""
    out: list[object] = []
    for line in lines:
        found = rules.match(line.decode("utf-8", "replace"))
        if found is None:
            out.append("plain")
        elif not (found.phase_starts or found.phase_dones or found.signals or found.progress
                  or found.finish):
            out.append("noise")
        else:
            out.append(found)
    return out


def comparable(items: list[object]) -> list[object]:
    """LineMatch holds regex.Match objects, which compare by identity: compare their spans."""
    def plain(item: object) -> object:
        if isinstance(item, str):
            return item
        assert isinstance(item, LineMatch)
        return (item.phase_starts, item.phase_dones, item.signals, item.noise,
                tuple((r, m.span(), m.groupdict()) for r, m in item.progress), item.finish)
    return [plain(i) for i in items]


def run_engine(rules: RuleSet, prefilter: Prefilter | None, data: bytes, *, block: int,
               stall_every: int = 0) -> tuple[list, dict, ProgressJudge]:
    """Feed `data` in blocks through a LineSplitter (as check and the follower do); every
    `stall_every` blocks, let the clock pass the stall threshold so recoveries are tested."""
    clock = FakeClock()
    engine = Engine(rules, default_stall=30.0, clock=clock, prefilter=prefilter)
    splitter = LineSplitter()
    events: list = []
    for i in range(0, len(data), block):
        events += engine.feed_block("log", splitter.push(data[i:i + block]))
        clock.advance(40.0 if stall_every and (i // block) % stall_every == 0 else 1.0)
        events += engine.tick()
    events += engine.feed_block("log", splitter.flush())
    return events, engine.state(), engine.judge


def finder_engine(finder: str, rules: RuleSet, data: bytes, *, block: int,
                  stall_every: int = 0) -> tuple[list, dict, ProgressJudge]:
    """`run_engine` with the finder's matching: no prefilter, or one built for `rules`."""
    prefilter = None if finder == "regex" else block_matcher(rules)
    return run_engine(rules, prefilter, data, block=block, stall_every=stall_every)


def _without_rank_rows(events: list) -> list:
    """Per-rank rows and each laggard's idle time hold what each way of reading saw (a rank's
    last line, when it last moved); who holds the job up, and why, must agree."""
    return [dataclasses.replace(e, ranks=(), laggards=tuple(
        dataclasses.replace(lag, last_progress_s=None,
                            why=regex.sub(r"silent for [0-9hms]+", "silent", lag.why))
        for lag in e.laggards)) if isinstance(e, StallEvent) else e for e in events]


def assert_same_engine(rules: RuleSet, data: bytes, *, block: int, stall_every: int = 0,
                       prefilter: Prefilter | None = None) -> list:
    """The engine gives the same events, state and progress memory with the block matcher
    as line by line; returns the events."""
    prefilter = prefilter or block_matcher(rules)
    fast = run_engine(rules, prefilter, data, block=block, stall_every=stall_every)
    slow = run_engine(rules, None, data, block=block, stall_every=stall_every)
    # Each rank's last line and idle time are what each path saw of the lines a rule does
    # not decide; the laggards, and everything else, must agree.
    assert _without_rank_rows(fast[0]) == _without_rank_rows(slow[0])
    assert {**fast[1], "ranks": None} == {**slow[1], "ranks": None}
    assert fast[2] == slow[2]  # what the progress judge remembers, lines set aside included
    return slow[0]


# --- rule sets the tests share ----------------------------------------------------------

ORIGIN = Origin("t.yaml", 1, "t")
GENERIC = Origin("generic.yaml", 1, "generic", generic=True)


def rule_set(*, noise: tuple[str, ...] = (), signals: tuple[str, ...] = (),
             beats: tuple[str, ...] = ()) -> RuleSet:
    """One pack of noise rules, warning signals and heartbeats with these patterns."""
    pack = RulePack(
        name="t", file="t.yaml",
        noise=tuple(NoiseRule(f"n{i}", p, ORIGIN) for i, p in enumerate(noise)),
        signals=tuple(SignalRule(f"s{i}", p, "warning", ORIGIN) for i, p in enumerate(signals)),
        progress=tuple(ProgressRule(f"p{i}", p, ORIGIN, heartbeat=True)
                       for i, p in enumerate(beats)),
    )
    return RuleSet([pack])


NOISY = rule_set(noise=(r"\bNCCL INFO\b",), signals=("WARN",), beats=(r"alive \d+",))

# A pack's rules and one of the generic layer's, whose words pack lines also hold.
LAYERED = RuleSet([RulePack(
    name="t", file="t.yaml",
    phases=(PhaseRule("loop", "Training loop", r"step \d+ -", ORIGIN),
            PhaseRule("wait", "Waiting for resources", r"(?i)\bpending\b.*\bgpus?\b", GENERIC),
            PhaseRule("sync", "Weight sync", r"SYNC start", ORIGIN, done=r"SYNC done")),
    progress=(ProgressRule("steps", r"step (?P<n>\d+) -", ORIGIN, counter="n"),
              ProgressRule("metrics", r"throughput: [\d.]+", ORIGIN, heartbeat=True)),
)])
