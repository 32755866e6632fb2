"""The block matcher's own workings: how it cuts blocks, translates patterns for Hyperscan,
falls back, and sets lines aside. It must never change what the engine reports, so these
tests too compare it with matching line by line (RuleSet.match); what a line means, and the
logs both finders must read alike, are held in tests/core/test_line_meaning_contract.py."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
import regex

from hangwatch.core import prefilter as prefilter_module
from hangwatch.core.clock import FakeClock
from hangwatch.core.engine import Engine
from hangwatch.core.events import PhaseEvent, RecoveredEvent, StallEvent
from hangwatch.core.model import NoiseRule, PhaseRule, ProgressRule, RulePack, SignalRule
from hangwatch.core.prefilter import BACK_WINDOW, PROBE_LINES, Prefilter, build_prefilter, try_build
from hangwatch.core.rules import RuleSet
from hangwatch.core.segments import PLAIN, Spans
from hangwatch.core.translate import Untranslatable, line_forms, translate
from hangwatch.packs.load import load_pack_text, load_rule_set
from tests.core.finders import (
    LAYERED,
    NOISY,
    ORIGIN,
    assert_same_engine,
    comparable,
    expected,
    rule_set,
    verdicts,
)

hyperscan = pytest.importorskip("hyperscan")

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "tests" / "fixtures" / "packs").glob("*/*.log"))

# --- the built-in packs --------------------------------------------------------------------

def test_every_builtin_pattern_translates_exactly():
    rules = load_rule_set()
    for _kind, rule_id, pattern in rules.patterns():
        assert translate(pattern).exact, (rule_id, pattern)


def test_a_block_dense_with_start_hits_gives_the_same_events_as_line_by_line(builtin,
                                                                           monkeypatch):
    """After progress, a chunk where every line is a START or progress hit (a progress-heavy
    RL log) stops its one-scan listing at once and goes window by window: the same events."""
    rules, prefilter = builtin
    dense: list[bool] = []
    scan = prefilter_module._FirstHits._scan

    def spied(self: prefilter_module._FirstHits) -> None:
        scan(self)
        dense.append(self._dense)

    monkeypatch.setattr(prefilter_module._FirstHits, "_scan", spied)
    lines = [b"(TaskRunner pid=410) 2026-01-11 10:00:00 Starting training loop"]
    for n in range(1, 3000):
        lines += [b"(WorkerDict pid=3001) Processing batch %d" % n,
                  b"(TaskRunner pid=411) step:%d - actor/pg_loss:-0.53" % n,
                  b"INFO 01-11 10:00:05 [metrics.py:455] Avg prompt throughput: 261.0 tokens/s"]
    data = b"\n".join(lines) + b"\n"
    events = assert_same_engine(rules, data, block=1 << 20, prefilter=prefilter)
    assert any(isinstance(e, PhaseEvent) and e.state == "started" for e in events)
    assert dense and all(dense)


# --- blocks: plain lines, noise runs, recoveries -------------------------------------------

def test_block_of_noise_longer_than_the_probe_has_no_progress():
    prefilter = build_prefilter(NOISY)
    data = b"h:1:2 [0] NCCL INFO Channel 00\n" * (PROBE_LINES * 3)
    assert list(prefilter.segments(data)) == [(PROBE_LINES * 3, "", None)]


def test_plain_line_after_a_long_noise_run_is_found_at_its_place():
    prefilter = build_prefilter(NOISY)
    noise = b"NCCL INFO x\n" * (PROBE_LINES + 40)
    assert list(prefilter.segments(noise + b"plain\n" + noise)) == [
        (PROBE_LINES + 40, "plain", PLAIN), (PROBE_LINES + 40, "", None)]


def test_plain_lines_are_counted_once_the_caller_needs_none():
    prefilter = build_prefilter(NOISY)
    wanted = iter([True, False])
    data = b"one\nNCCL INFO x\ntwo\nthree\n"
    assert list(prefilter.segments(data, lambda: next(wanted, False))) == [
        (0, "one", PLAIN), (3, "", None)]


# --- translation ---------------------------------------------------------------------------

@pytest.mark.parametrize("pattern", [
    r"(?i)nccl warn", r"a(?i)b|c", r"(?i:ab)c", r"x{,3}y{2}z{,}", r"a{}b", r"a{x}", r"{ab}",
    r"[]a]+", r"[^]a]", r"[\]\\-]", r"[[:digit:]x]", r"\Aab\Z", r"^\d+$", r"\bfo\B",
    r"[^\w\s]", r"(?s).", r"(?P<n>\d+)/(?P=n)?", r"\x41\101\u0042", r"a.*?b+?c??",
    r"(?#comment)a", r"\N{LATIN SMALL LETTER A}b", r"\p{Lu}\P{L}", r"(?i)\u212a",
])
def test_tricky_syntax_translates_to_the_same_lines(pattern):
    check_pattern(pattern, random.Random(pattern), lines=400)


@pytest.mark.parametrize("pattern", [
    r"a(?=b)", r"(?<!x)y", r"(?<=\s)z", r"(a)\1", r"(?>a+)b", r"a++b", r"(?:ab){e<=1}",
    r"(?(1)a|b)", r"a\Kb", r"\mword\M", r"x\Gy",
])
def test_constructs_hyperscan_lacks_widen_to_a_superset(pattern):
    assert not translate(pattern).exact
    check_pattern(pattern, random.Random(pattern), lines=400)


@pytest.mark.parametrize("pattern", [r"(?x) a b", r"(?V1)[[a]--[b]]", r"(?f)ss", r"(?w)\b"])
def test_flags_it_cannot_follow_are_refused(pattern):
    with pytest.raises(Untranslatable):
        translate(pattern)
    prefilter, status = try_build(rule_set(signals=(pattern,)))
    assert prefilter is None
    assert "not used" in status


def test_random_patterns_agree_with_regex_on_random_lines():
    rng = random.Random(20260111)
    for _ in range(300):
        check_pattern(random_pattern(rng, 3), rng, lines=60)


# --- falling back --------------------------------------------------------------------------

def test_rules_that_can_match_the_empty_string_keep_their_lines():
    rules = rule_set(noise=(r"^\s*$",), signals=("x*y?",))  # blank lines; every line
    prefilter, status = try_build(rules)
    assert prefilter is not None
    assert "(1 exact on ASCII lines); 1 widened where Hyperscan refused them" in status
    lines = [b"", b"  ", b"abc", b"xy", b"\t"]
    assert comparable(verdicts(prefilter, lines)) == comparable(expected(rules, lines))


def test_without_hyperscan_the_engine_reads_line_by_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "hyperscan", None)
    prefilter, status = try_build(NOISY)
    assert prefilter is None
    assert "pip install hyperscan" in status


def test_rules_whose_loose_forms_hyperscan_refuses_are_matched_in_full(monkeypatch):
    prefilter = build_prefilter(NOISY)
    monkeypatch.setitem(prefilter._lazy, "loose", False)
    raw = ["NCCL INFO é", "é WARN", "é", "alive 1 é"]
    lines = [s.encode() for s in raw]
    assert comparable(verdicts(prefilter, lines)) == comparable(expected(NOISY, lines))


def test_pack_text_rules_compile_to_a_prefilter():
    rules = RuleSet([load_pack_text(
        "pack: p\nphases:\n  - id: a\n    start: 'A START'\n    done: 'A DONE'\n", "p.yaml")])
    prefilter = build_prefilter(rules)
    assert prefilter is not None
    assert "2 patterns (2 exact" in prefilter.status


# --- random patterns -----------------------------------------------------------------------

ALPHABET = "abAB01 _.:-[]()\t"
OTHER = ["é", "\u2588", "\u212a", "\u017f", "\u00a0", "\u0301", "\ufffd"]


def random_pattern(rng: random.Random, depth: int) -> str:
    parts = []
    for _ in range(rng.randint(1, 4)):
        parts.append(random_item(rng, depth) + random_quantifier(rng))
    pattern = "".join(parts)
    if rng.random() < 0.2:
        pattern += "|" + random_pattern(rng, depth - 1) if depth > 0 else ""
    if rng.random() < 0.1:
        pattern = "(?i)" + pattern
    return pattern


def random_item(rng: random.Random, depth: int) -> str:
    k = rng.random()
    if k < 0.35:
        return rng.choice(["a", "b", "A", "0", "1", " ", "_", r"\.", ":", "-", r"\[", r"\("])
    if k < 0.55:
        return rng.choice([".", r"\d", r"\w", r"\s", r"\D", r"\W", r"\S"])
    if k < 0.7:
        return rng.choice(["[a-b0]", "[^ab]", r"[\d.]", r"[^\s:]", "[A-Z_]", r"[\w-]"])
    if k < 0.8:
        return rng.choice(["^", "$", r"\b", r"\B"])
    if depth <= 0:
        return "a"
    inner = random_pattern(rng, depth - 1)
    return rng.choice(["(?:{})", "({})", "(?i:{})", "(?:{}|b)"]).format(inner)


def random_quantifier(rng: random.Random) -> str:
    if rng.random() < 0.6:
        return ""
    return rng.choice(["*", "+", "?", "{1,2}", "{2}", "{,2}", "*?", "+?", "{0,1}?"])


def random_line(rng: random.Random, other: bool) -> str:
    chars = [rng.choice(ALPHABET) for _ in range(rng.randint(0, 12))]
    if other and chars:
        chars[rng.randrange(len(chars))] = rng.choice(OTHER)
    return "".join(chars)


def check_pattern(pattern: str, rng: random.Random, *, lines: int) -> None:
    """Strict form == regex on ASCII lines (when exact, else a superset); loose form is a
    superset on any line; the narrow forms hit every line the pattern hits (the strict one
    on ASCII lines); and the whole prefilter gives RuleSet.match's verdict."""

    try:
        compiled = regex.compile(pattern)
    except regex.error:
        return
    forms = line_forms(pattern)
    strict, loose = _database(forms.strict), _database(forms.loose)
    narrow_strict, narrow_loose = _database(forms.narrow_strict), _database(forms.narrow_loose)
    samples = [random_line(rng, other=i % 3 == 0) for i in range(lines)]
    for text in samples:
        want = compiled.search(text) is not None
        raw = text.encode()
        if text.isascii() and strict is not None:
            got = _hits(strict, b"x\n" + raw + b"\nx", len(raw) + 2)
            assert got == want or (got and not forms.exact), (pattern, text, forms.strict)
        if loose is not None:
            assert _hits(loose, raw + b"\n", len(raw)) or not want, (pattern, text, forms.loose)
        if narrow_loose is not None:
            assert _hits(narrow_loose, raw + b"\n", len(raw)) or not want, (
                pattern, text, forms.narrow_loose)
        if text.isascii() and narrow_strict is not None:
            assert _hits(narrow_strict, b"x\n" + raw + b"\nx", len(raw) + 2) or not want, (
                pattern, text, forms.narrow_strict)
    rules = rule_set(signals=(pattern,), noise=("::",))
    prefilter = build_prefilter(rules)
    assert prefilter is not None
    raw_lines = [t.encode() for t in samples]
    assert verdicts(prefilter, raw_lines) == expected(rules, raw_lines)


def _database(form: str) -> object | None:
    """The form compiled alone, or None when Hyperscan refuses it (it can match the empty
    string: the prefilter then tries the rule on every line)."""
    db = hyperscan.Database()
    try:
        db.compile(expressions=[form.encode()], flags=hyperscan.HS_FLAG_MULTILINE)
    except hyperscan.error as exc:
        assert "never match" in str(exc) or "empty" in str(exc) or "anchor" in str(exc), exc
        return None
    return db


def _hits(db: object, data: bytes, line_end: int) -> bool:
    """Whether a match ends on the line of `data` that ends at `line_end` (at its last byte,
    or just past its newline)."""
    ends: list[int] = []
    db.scan(data, match_event_handler=lambda _i, _s, end, _f, _c: ends.append(end))  # type: ignore[attr-defined]
    line_start = data.rfind(b"\n", 0, line_end) + 1
    return any(line_start < end <= line_end + 1 for end in ends)


# --- lines set aside: after a block's progress, only the last of each rule counts ------------

LOOP = RuleSet([RulePack(
    name="t", file="t.yaml",
    phases=(PhaseRule("loop", "Training loop", r"step \S+ -", ORIGIN),
            PhaseRule("sync", "Weight sync", r"SYNC start", ORIGIN, done=r"SYNC done")),
    progress=(ProgressRule("steps", r"step (?P<n>\S+) -", ORIGIN, counter="n"),
              ProgressRule("beat", r"alive (?P<t>\d+)s", ORIGIN, heartbeat=True)),
    noise=(NoiseRule("spew", r"NCCL INFO", ORIGIN),),
)])


def counting_matched(prefilter: Prefilter) -> list[int]:
    """Count the flagged lines matched one by one instead of set aside."""
    asked = [0]
    line = prefilter.line

    def counted(raw: bytes, candidates: tuple[int, bool] | None) -> tuple[str, object]:
        asked[0] += 1
        return line(raw, candidates)

    prefilter.line = counted  # type: ignore[method-assign]
    return asked


def test_counter_line_without_a_number_leaves_the_value_before_it():
    # "step x" matches the counter rule but holds no number: the judge keeps 2, so the
    # "step 2" after the stall is a repeat, not a recovery, whichever way the lines are read.
    block = b"plain\n" + b"".join(b"step %d - loss\n" % i for i in range(1, 3))
    block += b"step x - loss\nNCCL INFO spew\nalive 3s\nalive 4s\n"
    prefilter = build_prefilter(LOOP)
    assert prefilter is not None
    asked = counting_matched(prefilter)
    events = assert_same_engine(LOOP, block + b"step 2 - loss\n" * 3, block=len(block),
                                stall_every=1, prefilter=prefilter)
    assert any(isinstance(e, StallEvent) for e in events)
    assert not any(isinstance(e, RecoveredEvent) for e in events)
    # Asked: "step 1" (it opens the loop) and the repeats of the second block, which has no
    # progress of its own; set aside: "step 2", "step x" and both "alive" lines.
    assert asked[0] == 4


def test_start_of_a_phase_that_is_not_open_is_never_set_aside():
    data = (b"plain\nstep 1 - a\nstep 2 - b\nSYNC start\nstep 3 - c\nSYNC done\n"
            b"step 4 - d\nstep 5 - e\n")
    events = assert_same_engine(LOOP, data, block=len(data))
    phases = [(e.phase, e.state, e.line) for e in events if isinstance(e, PhaseEvent)]
    assert phases == [("loop", "started", 2), ("loop", "completed", 4),
                      ("sync", "started", 4), ("loop", "started", 5),
                      ("sync", "completed", 6)]


@pytest.mark.parametrize("block", [7, 50, 1 << 16])
def test_lines_set_aside_leave_the_judge_as_line_by_line_reading_does(block):
    rng = random.Random(3)
    pieces = [b"plain", b"step %d - x", b"step y - x", b"alive %ds", b"NCCL INFO z",
              b"SYNC start", b"SYNC done", "step %d - \u2588".encode()]
    lines = []
    for _ in range(3000):
        piece = rng.choice(pieces)
        lines.append(piece % rng.randrange(6) if b"%d" in piece else piece)
    assert_same_engine(LOOP, b"\n".join(lines) + b"\n", block=block, stall_every=5)


@pytest.mark.parametrize("block", [40, 300, 1 << 20])
def test_wait_loops_among_noise_give_the_same_events_as_line_by_line(block):
    rng = random.Random(5)
    healthy = [b"NCCL INFO spew", b"alive", b"a WARN here", b"step %d loss 0.5", b"new %d"]
    waiting = [b"NCCL INFO spew", b"alive", b"still waiting for rank 3 (attempt %d)"]
    lines = []
    for i in range(3000):
        line = rng.choice(healthy if i // 300 % 2 else waiting)
        lines.append(line % i if b"%d" in line else line)
    events = assert_same_engine(NOISY, b"\n".join(lines) + b"\n", block=block, stall_every=2)
    if block < 1000:  # stalls fall between blocks, so a wait-only stretch spans some
        assert any(isinstance(e, StallEvent) and e.waits for e in events)


def test_a_block_of_progress_after_its_first_line_reaches_the_engine_as_a_few_segments():
    # Thousands of step, heartbeat and noise lines once the block has shown progress: the
    # engine is handed whole stretches to set aside, not a segment a line.
    lines = [b"step %d - x" % i if i % 3 else b"alive %ds" % i for i in range(6000)]
    lines[::7] = [b"NCCL INFO spew"] * len(lines[::7])
    data = b"\n".join(lines) + b"\n"
    prefilter = build_prefilter(LOOP)
    assert prefilter is not None
    progressed = [False]
    segments = []
    for count, _text, match in prefilter.segments(data, lambda: not progressed[0],
                                                 lambda rule: rule.id == "loop"):
        progressed[0] = True  # the first segment (a step) is progress
        segments.append((count, match))
    assert len(segments) < 10
    assert sum(count + (not isinstance(m, Spans) and m is not None) for count, m in segments) \
        == 6000
    assert {e.rule.id for _, m in segments if isinstance(m, Spans) for e in m.progress} == {
        "steps", "beat"}


def test_newest_line_of_a_rare_progress_rule_far_back_in_a_stretch_is_remembered():
    # One heartbeat, then many windows' worth of other lines set aside: the newest (only)
    # heartbeat is searched for backwards, in growing windows, and found.
    filler = b"step 7 - x\nNCCL INFO spew\n" * (BACK_WINDOW * 6 // 24)
    data = b"step 1 - x\nalive 42s\n" + filler + b"SYNC start\nstep 8 - y\n"
    assert_same_engine(LOOP, data, block=len(data))
    data2 = data + b"alive 43s\n" + filler + b"SYNC done\n"
    events = assert_same_engine(LOOP, data2, block=len(data2), stall_every=1)
    assert any(isinstance(e, PhaseEvent) and e.phase == "sync" for e in events)


@pytest.mark.parametrize("block", [64, 2000, 1 << 18])
def test_phases_that_start_every_few_lines_among_set_aside_lines_match_line_by_line(block):
    # Dense STARTs (each line its own phase for a while) and sparse ones, between lines a
    # rule set aside: each way the prefilter cuts a stretch gives line-by-line events.
    phases = tuple(PhaseRule(f"m{i}", f"Marker {i}", f"marker {i} begins$", ORIGIN)
                   for i in range(300))
    rules = RuleSet([RulePack(name="t", file="t.yaml", phases=phases + LOOP.phases,
                              progress=LOOP.progress, noise=LOOP.noise)])
    rng = random.Random(21)
    lines = []
    for i in range(6000):
        dense = i // 500 % 2
        if rng.randrange(100) < (60 if dense else 1):
            lines.append(b"marker %d begins" % rng.randrange(300))
        else:
            lines.append(rng.choice([b"step %d - x" % i, b"alive %ds" % (i // 9),
                                     b"NCCL INFO spew", b"step 3 - \xe2\x96\x88"]))
    assert_same_engine(rules, b"\n".join(lines) + b"\n", block=block, stall_every=4)


# --- what a line costs: the hits it has, not the rules there are --------------------------

def test_only_the_listed_characters_outside_ascii_fold_onto_ascii_under_ignorecase():

    from hangwatch.core.translate import CASE_PARTNERS

    everything = "".join(chr(c) for c in range(0x80, sys.maxunicode + 1)
                         if not 0xD800 <= c < 0xE000)
    assert "".join(regex.findall(r"(?i)[\x00-\x7f]", everything)) == CASE_PARTNERS


@pytest.mark.parametrize("pattern", [r"(?i)\bkiss\b", r"(?i)[a-k]+ OK", r"(?i:i)s"])
def test_case_folded_letters_meet_their_partners_outside_ascii(pattern):
    rng = random.Random(11)
    check_pattern(pattern, rng, lines=40)
    lines = ["\u212aiss", "K\u0130SS", "kis\u017f", "\u2588\u2588\u2588\u2588 OK", "\u0131s",
             "a\u212a OK", "\u2588s"]
    rules = rule_set(signals=(pattern,))
    prefilter = build_prefilter(rules)
    raw = [t.encode() for t in lines]
    assert comparable(verdicts(prefilter, raw)) == comparable(expected(rules, raw))


def test_lines_a_pack_rule_surely_hits_are_set_aside_whatever_generic_words_they_hold():
    # The metrics line also holds words of a generic START ("Pending ... GPU"), which the
    # pack rule outranks: once the block has shown progress, it is set aside like a step.
    metrics = b"throughput: %d.0, Pending: 1 reqs, GPU use 3%%"
    lines = [b"step 1 - a"] + [metrics % i for i in range(50)] + [b"Pending 2 GPUs"]
    prefilter = build_prefilter(LAYERED)
    asked = counting_matched(prefilter)
    data = b"\n".join(lines) + b"\n"
    events = assert_same_engine(LAYERED, data, block=len(data), prefilter=prefilter)
    # Asked: the step opening the loop, and the last line (its generic phase is not open).
    assert asked[0] == 2
    assert [(e.phase, e.state) for e in events if isinstance(e, PhaseEvent)] == [
        ("loop", "started"), ("wait", "started")]


# --- the rare lines: scanned for by the narrow forms ---------------------------------------

GAPPED = RuleSet([RulePack(
    name="t", file="t.yaml",
    phases=(PhaseRule("loop", "Training loop", r"step \d+ -", ORIGIN),),
    progress=(ProgressRule("steps", r"step (?P<n>\d+) -", ORIGIN, counter="n"),),
    signals=(SignalRule("peer", r"(?i)\b(?:ranks?|nodes?)\b[^\n.;]*\b(?:unreachable|not "
                                r"responding)\b", "warning", ORIGIN),
             SignalRule("kill", r"(?i)\bworker\b.*\bgot killed\b", "error", ORIGIN)),
)])


def test_a_rule_with_words_on_both_sides_of_a_gap_is_scanned_for_by_its_longer_side():
    forms = line_forms(GAPPED.signals[0].match)
    assert "unreachable" in forms.narrow_strict.lower() or "\\x55\\x75" in forms.narrow_strict
    narrow = _database(forms.narrow_strict)
    # A line naming a rank, with nothing after it, is not one to look at.
    assert not _hits(narrow, b"rank 3 nRanks 8 comm 0x55\n", 25)
    assert _hits(narrow, b"rank 3 is unreachable\n", 21)


@pytest.mark.parametrize("other", [False, True])
@pytest.mark.parametrize("block", [200, 1 << 16])
def test_rare_lines_after_progress_give_the_events_of_line_by_line(block, other):
    # Blocks of pure ASCII are scanned with the strict narrow forms, others with the loose
    # ones (a Kelvin sign folds onto k): the same lines are found either way.
    rng = random.Random(13)
    pieces = [b"step %d - x", b"rank %d nRanks 8 comm 0x55 spew", b"rank %d is unreachable",
              b"nodes %d; not responding", b"node %d not responding", b"worker %d got killed",
              b"plain %d", "worker %d got \u212ailled".encode() if other else b"worker %d ok"]
    lines = [rng.choice(pieces).replace(b"%d", b"%d" % i) for i in range(3000)]
    assert_same_engine(GAPPED, b"\n".join(lines) + b"\n", block=block, stall_every=3)


def test_a_warmed_prefilter_compiles_nothing_while_it_reads(monkeypatch):
    rules = load_rule_set()
    prefilter = build_prefilter(rules, None)
    assert prefilter is not None
    prefilter.warm()

    def no_compiling(*_args, **_kwargs):
        raise AssertionError("a database compiled while reading")

    monkeypatch.setattr(prefilter_module, "compile_database", no_compiling)
    monkeypatch.setattr(prefilter_module, "compilable", no_compiling)
    engine = Engine(rules, default_stall=600.0, clock=FakeClock(), prefilter=prefilter)
    log = Path(__file__).resolve().parents[1] / "fixtures" / "packs" / "verl-gkd"
    for path in sorted(log.glob("*.log")):
        engine.feed_block(path.name, path.read_bytes())
    assert engine.lines  # it read them, with the databases warm() built


def test_a_list_pattern_past_hyperscans_length_limit_is_scanned_as_its_alternatives():
    # A phase's list of caseless alternatives is one pattern whose loose form passes the
    # 16,000 bytes Hyperscan takes: compiled as its alternatives it stays exact, instead of
    # being widened to match every line (seconds to find, and every line searched again).
    from hangwatch.core.databases import CUT_CHARS, alternatives

    words = [f"(?i)\\bwarming shard {i} of the cache\\b" for i in range(300)]
    pack = "pack: big\nphases:\n  - id: warm\n    title: Warming\n    start:\n" + "".join(
        f"      - '{w}'\n" for w in words)
    rules = RuleSet([load_pack_text(pack, "big.yaml")])
    assert len(line_forms(rules.phases[0].start).loose) > 2 * CUT_CHARS
    prefilter, status = try_build(rules)
    assert prefilter is not None and "widened" not in status, status
    lines = ["INFO WARMING SHARD 299 OF THE CACHE", "warming shard 12 of the cache, 3 left",
             "warming shard 12 of a cache", "cooling shard 12 of the cache"]
    for line in lines:
        assert prefilter.match(line) == rules.match(line), line
    data = "".join(f"{line}\n" for line in lines * 50).encode()
    assert_same_engine(rules, data, block=300, stall_every=2, prefilter=prefilter)
    # the cut respects groups, classes and escapes
    assert alternatives(r"a|(?:b|c)|[|]|\||[]|]") == ["a", "(?:b|c)", "[|]", r"\|", "[]|]"]
    assert alternatives("(a|b") == ["(a|b"]  # unbalanced: left whole
