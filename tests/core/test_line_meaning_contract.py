"""One definition of what a line means (`core/meaning.py`), two finders: the `regex`
line-by-line matcher (`RuleSet.match`, an engine with no prefilter) and the Hyperscan block
matcher (`core/prefilter.py`). The cases below run against each finder and say, by hand,
what every line means and what events a log gives; where no one can write the answer by
hand (fixture, corpus and generated logs), the two are compared with each other."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from hangwatch.core.events import FinishEvent, PhaseEvent, RecoveredEvent, SignalEvent, StallEvent
from hangwatch.core.hitcounts import HitCounter
from hangwatch.core.meaning import HitKind
from hangwatch.core.model import (
    FinishRule,
    NoiseRule,
    PhaseRule,
    ProgressRule,
    RulePack,
    SignalRule,
)
from hangwatch.core.rules import RuleSet
from tests.core.finders import (
    FINDERS,
    GENERIC,
    LAYERED,
    NOISY,
    ORIGIN,
    assert_same_engine,
    block_matcher,
    comparable,
    described,
    expected,
    finder_engine,
    meanings,
    rule_set,
    verdicts,
)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "tests" / "fixtures" / "packs").glob("*/*.log"))

# A pack and the generic layer with rules of every kind, the generic layer listed first (a
# line's one noise or finish rule is still the pack's).
WORDS = RulePack(
    name="generic", file="generic.yaml", generic=True,
    phases=(PhaseRule("wait", "Waiting for resources", r"(?i)\bpending\b.*\bgpus?\b", GENERIC),
            PhaseRule("load", "Loading the model", r"(?i)\bloading model\b", GENERIC,
                      done=r"(?i)\bmodel loaded\b")),
    signals=(SignalRule("timeout", r"(?i)\btimed out\b", "warning", GENERIC),
             SignalRule("killed", r"(?i)\bkilled\b", "error", GENERIC)),
    noise=(NoiseRule("debug", r"(?i)\bdebug\b", GENERIC),),
    progress=(ProgressRule("bar", r"(?P<done>\d+)/(?P<total>\d+) \[", GENERIC, counter="done"),),
    finish=(FinishRule("finished", r"(?i)\bfinished\b", GENERIC),),
)
TRAINER = RulePack(
    name="trainer", file="t.yaml",
    phases=(PhaseRule("loop", "Training loop", r"step \d+ -", ORIGIN),
            PhaseRule("sync", "Weight sync", r"SYNC start", ORIGIN, done=r"SYNC done")),
    signals=(SignalRule("warn", r"WARN", "warning", ORIGIN),),
    noise=(NoiseRule("spew", r"NCCL INFO", ORIGIN), NoiseRule("info", r"\bINFO\b", ORIGIN)),
    progress=(ProgressRule("steps", r"step (?P<n>\d+) -", ORIGIN, counter="n"),
              ProgressRule("beat", r"alive \d+s", ORIGIN, heartbeat=True)),
    finish=(FinishRule("complete", r"Training complete", ORIGIN),),
)
LAYERS = RuleSet([WORDS, TRAINER])

# (line, what it means): the rules that count, in kind order (tests/core/finders.described).
CASES = [
    ("", "plain"),
    ("nothing to see here", "plain"),
    # one kind
    ("SYNC start", "phase-start sync"),
    ("SYNC done", "phase-done sync"),
    ("a WARN here", "signal warn"),
    ("h:1:2 [0] NCCL INFO Channel 00", "noise spew"),
    ("step 3 - loss 1.0", "phase-start loop, progress steps n=3"),
    ("alive 42s", "progress beat 'alive 42s'"),
    ("Training complete", "finish complete"),
    # the generic layer alone
    ("Pending: 2 GPUs", "phase-start wait"),
    ("Loading model weights", "phase-start load"),
    ("model loaded in 3 s", "phase-done load"),
    ("request timed out", "signal timeout"),
    ("all workers finished", "finish finished"),
    ("17/20 [00:03<00:01]", "progress bar done=17 total=20"),
    ("DEBUG: Pending 1 GPU", "phase-start wait, noise debug"),
    # a pack's hits outrank the generic layer's on the same line
    ("step 4 - Pending 2 GPUs", "phase-start loop, progress steps n=4"),
    ("NCCL INFO Pending 2 GPUs", "noise spew"),
    ("SYNC start (debug)", "phase-start sync"),
    ("a WARN: request timed out", "signal warn"),
    ("Training complete, all finished", "finish complete"),
    ("alive 5s 3/8 [00:01<00:02]", "progress beat 'alive 5s'"),
    # noise: one rule a line, a pack's before the generic layer's, then in rule order
    ("NCCL INFO debug", "noise spew"),
    ("debug INFO", "noise info"),
    ("INFO NCCL INFO", "noise spew"),
    ("debug only", "noise debug"),
    ("NCCL INFO step 5 - x", "phase-start loop, noise spew, progress steps n=5"),
    # lines hit by several kinds
    ("SYNC done WARN step 9 - Training complete",
     "phase-start loop, phase-done sync, signal warn, progress steps n=9, finish complete"),
    ("SYNC start alive 7s", "phase-start sync, progress beat 'alive 7s'"),
    ("step 7 - alive 43s INFO", "phase-start loop, noise info, progress steps n=7, "
                                "progress beat 'alive 43s'"),
    ("request timed out, worker killed", "signal timeout, signal killed"),
    # other bytes than ASCII, and letters case folding meets outside ASCII
    ("step 8 - \u2588\u2588\u2588 loss", "phase-start loop, progress steps n=8"),
    ("caf\u00e9 NCCL INFO", "noise spew"),
    ("Pending 2 GPUs \u2714", "phase-start wait"),
    ("\u00e9\u00e9 plain", "plain"),
    ("PENDING 3 gpu", "phase-start wait"),
    ("worker \u212aILLED", "signal killed"),  # KELVIN SIGN folds onto k
    ("pending 2 GPU\u017f", "phase-start wait"),  # LONG S folds onto s
    ("\u0130NFO only", "plain"),  # not INFO: the pack's rules are case sensitive
    ("D\u00e9BUG", "plain"),
]


@pytest.mark.parametrize("finder", FINDERS)
def test_each_line_means_what_the_definition_says(finder):
    lines = [line.encode() for line, _ in CASES]
    found = meanings(finder, LAYERS, lines)
    assert list(zip(lines, found, strict=True)) == [
        (line, meaning) for line, (_, meaning) in zip(lines, CASES, strict=True)]


@pytest.mark.parametrize("finder", FINDERS)
def test_lines_mean_the_same_among_other_lines_as_alone(finder):
    # A block of every case, many times over and shuffled: what a line means does not
    # depend on its neighbours, nor on where a block starts.
    rng = random.Random(4)
    cases = CASES * 20
    rng.shuffle(cases)
    lines = [line.encode() for line, _ in cases]
    assert meanings(finder, LAYERS, lines) == [meaning for _, meaning in cases]


def test_a_line_read_again_with_a_lone_surrogate_means_what_line_by_line_matching_says():
    # No bytes decode to such a text: the block matcher's one-line path matches it as text.
    prefilter = block_matcher(LAYERS)
    for text in ("step 5 - \ud800", "\udcff NCCL INFO x", "plain \ud83d", "Pending 2 GPUs \udc80"):
        assert described(prefilter.match(text)) == described(LAYERS.match(text))


# A log and the events it gives, whichever finder reads it, in any block size.
LOG = [
    "starting up",  # 1 plain: progress
    "DEBUG: Pending 1 GPU",  # 2 the generic wait starts
    "step 1 - loss 2.0",  # 3 the pack's loop starts
    "step 2 - Pending 2 GPUs",  # 4 the pack's step outranks the generic wait
    "NCCL INFO Pending 2 GPUs",  # 5 noise outranks it too
    "a WARN: request timed out",  # 6 the pack's signal only
    "SYNC start",  # 7
    "alive 3s",  # 8
    "\u2588\u2588 worker \u212aILLED",  # 9 a generic signal
    "SYNC done",  # 10
    "step 3 - alive 4s",  # 11
    "Training complete, all finished",  # 12 the pack's finish
]


def summary(events: list) -> list[tuple]:
    out: list[tuple] = []
    for e in events:
        if isinstance(e, PhaseEvent):
            out.append(("phase", e.phase, e.state, e.line))
        elif isinstance(e, SignalEvent):
            out.append(("signal", e.id, e.line))
        elif isinstance(e, FinishEvent):
            out.append(("finish", e.id, e.line))
    return out


@pytest.mark.parametrize("block", [7, 64, 1 << 16])
@pytest.mark.parametrize("finder", FINDERS)
def test_a_log_gives_the_events_the_definition_says(finder, block):
    data = "".join(line + "\n" for line in LOG).encode()
    events, state, _judge = finder_engine(finder, LAYERS, data, block=block)
    assert summary(events) == [
        ("phase", "wait", "started", 2),
        ("phase", "wait", "completed", 3), ("phase", "loop", "started", 3),
        ("signal", "warn", 6),
        ("phase", "loop", "completed", 7), ("phase", "sync", "started", 7),
        ("signal", "killed", 9),
        ("phase", "sync", "completed", 10),
        ("phase", "loop", "started", 11),
        ("phase", "loop", "completed", 12), ("finish", "complete", 12),
    ]
    assert state["finished"] is not None


@pytest.mark.parametrize("finder", FINDERS)
def test_a_search_that_times_out_counts_as_no_match(finder):
    rules = RuleSet([RulePack(name="t", file="t.yaml", progress=(
        ProgressRule("slow", r"(?:a|aa)+c(?P<n>\d)", ORIGIN, counter="n"),))])
    line = b"a" * 30 + b"b ac5"  # regex backtracks for about a second before it matches
    if finder == "regex":
        assert expected(rules, [line]) == ["plain"]
    else:
        assert verdicts(block_matcher(rules), [line]) == ["plain"]
    assert rules.timeouts == 1


def test_the_kinds_keep_the_spellings_users_read():
    assert [str(kind) for kind in HitKind] == [
        "phase-start", "phase-done", "signal", "noise", "progress", "finish"]
    assert f"{HitKind.PHASE_START:<12}|" == "phase-start |"


# --- both finders on logs no one writes the answer to by hand -----------------------------

@pytest.mark.parametrize("log", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_lines_get_the_verdict_of_line_by_line_matching(builtin, log):
    rules, prefilter = builtin
    lines = log.read_bytes().replace(b"\r\n", b"\n").replace(b"\r", b"\n").splitlines()
    assert comparable(verdicts(prefilter, lines)) == comparable(expected(rules, lines))


@pytest.mark.parametrize("block", [64, 4096, 1 << 20])
def test_fixture_logs_give_the_same_events_in_any_block_size(builtin, block):
    rules, prefilter = builtin
    for log in FIXTURES:
        assert_same_engine(rules, log.read_bytes(), block=block, stall_every=3,
                           prefilter=prefilter)


def test_generated_log_gives_the_same_events_and_recoveries(builtin, tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import loggen
    finally:
        sys.path.remove(str(ROOT / "bench"))
    rules, prefilter = builtin
    for mix in loggen.MIXES:
        log = tmp_path / f"{mix}.log"
        loggen.generate(log, 300_000, seed=7, mix=mix)
        events = assert_same_engine(rules, log.read_bytes(), block=9000, stall_every=2,
                                    prefilter=prefilter)
        assert any(isinstance(e, RecoveredEvent) for e in events)
        assert any(isinstance(e, StallEvent) for e in events)


@pytest.mark.parametrize("density", [3, 25, 250])
def test_per_step_logs_give_the_same_events_at_any_density(builtin, tmp_path, density):
    """A verl-GKD run (bench/steplog.py) with a phase or step event every `density` lines:
    phase cycling among set-aside NCCL and metrics lines, as line by line reading sees it,
    wherever the log ends and in any block size. (No stall is let fire: which Ray actor a
    stall calls silent is not yet the same both ways on these logs.)"""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import steplog
    finally:
        sys.path.remove(str(ROOT / "bench"))
    rules, prefilter = builtin
    for stop, block in ((None, 1 << 16), ("sync-rollout", 3000), ("update", 1 << 20)):
        log = tmp_path / f"{stop}.log"
        steplog.generate(log, 150_000, seed=density, density=density, stop=stop)
        events = assert_same_engine(rules, log.read_bytes(), block=block, prefilter=prefilter)
        assert sum(isinstance(e, PhaseEvent) for e in events) > 10


CORPUS = sorted((ROOT / "tests" / "corpus").glob("*/*.log"))
STOPS = b"".join(line + b"\n" for line in [
    b"Sampling: 45%|####5     | 9/20 [01:23<01:40]", b"rank 3 still busy",
    b"[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout: "
    b"WorkNCCL(SeqNum=7, OpType=ALLREDUCE) ran for 600004 milliseconds before timing out.",
    b"fetching done", b"step 3/10 loss 1.0", b"step 4/10 loss 1.0",
    b"Heartbeat monitor timed out! Process will be terminated"] * 40)


@pytest.mark.parametrize("block", [100])  # a block shorter than most lines: the most cuts
def test_real_hang_logs_and_stop_lines_give_the_same_places_as_line_by_line(builtin, block):
    """What came before a stop line and the place expected between phases are read from
    the same lines whichever way the block is cut (core/before.py, core/order.py)."""
    rules, prefilter = builtin
    for log in [*CORPUS, None]:
        data = STOPS if log is None else log.read_bytes()
        assert_same_engine(rules, data, block=block, stall_every=2, prefilter=prefilter)


def test_recovery_lands_on_the_first_plain_line_after_noise_and_a_signal():
    lines = [b"NCCL INFO a", b"a WARN b", b"NCCL INFO c", b"plain", b"NCCL INFO d", b"x"]
    events = assert_same_engine(NOISY, b"first\n" + b"\n".join(lines) + b"\n",
                                block=6, stall_every=1)
    assert [e.line for e in events if isinstance(e, RecoveredEvent)]


def test_unterminated_last_line_and_empty_lines_count_as_line_by_line():
    assert_same_engine(NOISY, b"\n\nNCCL INFO x\n\nWARN\nalive 3\nalive 3\nlast", block=1 << 20)
    assert_same_engine(NOISY, b"\n", block=1 << 20, stall_every=1)


def test_heartbeat_only_counts_when_it_changes():
    data = b"".join(b"alive 1\n" if i % 3 else b"alive 2\n" for i in range(50))
    assert_same_engine(NOISY, data, block=40, stall_every=1)


def test_line_with_other_bytes_is_matched_as_decoded_text():
    rules = rule_set(noise=(r"caf\w",), signals=(r"(?i)k.b", r"x\bY"), beats=(r"\d+/\d+",))
    prefilter = block_matcher(rules)
    lines = ["café", "cafe\u0301", "\u212a\u2588b", "x\u00e9Y", "3/4 \u2588\u2588",
             "\u00e9\u00e9 plain"]
    raw = [s.encode() for s in lines] + [b"caf\xff bad utf-8", b"\xe2\x96 k\xffB"]
    assert comparable(verdicts(prefilter, raw)) == comparable(expected(rules, raw))


@pytest.mark.parametrize("block", [30, 400, 1 << 16])
def test_generic_and_pack_hits_on_one_line_give_the_events_of_line_by_line(block):
    rng = random.Random(9)
    pieces = [b"step %d - x", b"throughput: %d.5 Pending GPU", b"Pending %d GPUs",
              b"throughput: 1.5", b"SYNC start", b"SYNC done", b"plain %d",
              "throughput: %d \u2588 pending gpu".encode(), "step %d - \u212a".encode()]
    lines = []
    for _ in range(2000):
        piece = rng.choice(pieces)
        lines.append(piece % rng.randrange(5) if b"%d" in piece else piece)
    assert_same_engine(LAYERED, b"\n".join(lines) + b"\n", block=block, stall_every=3)


def test_a_pack_of_thousands_of_phases_starts_each_as_line_by_line():
    phases = tuple(PhaseRule(f"p{i}", f"Phase {i}", f"marker {i} begins$", ORIGIN)
                   for i in range(2000))
    rules = RuleSet([RulePack(name="t", file="t.yaml", phases=phases)])
    data = b"".join(b"marker %d begins\n" % i for i in range(0, 2000, 3))
    events = assert_same_engine(rules, data, block=len(data))
    assert sum(isinstance(e, PhaseEvent) and e.state == "started" for e in events) == 667


def test_counting_hits_agrees_with_listing_them_where_a_pack_noise_outranks_generic_words():
    # `rules test` counts blocks it does not show from the flags: a line that only a pack's
    # noise counts, because that noise outranks the generic words on it, is a noise hit there
    # too, on ASCII lines and on lines with other bytes.
    rules = RuleSet([RulePack(name="t", file="t.yaml", noise=(NoiseRule("spew", r"NCCL INFO",
                                                                        ORIGIN),),
                              phases=LAYERED.phases)])
    prefilter = block_matcher(rules)
    assert prefilter is not None
    data = "".join(f"{line}\n" for line in (
        "x NCCL INFO Pending 2 GPUs", "NCCL INFO Pending 2 GPUs \u2588", "Pending 3 GPUs",
        "step 4 - a", "plain")).encode()
    counter = HitCounter(prefilter)
    counts, matched, feed = counter.counts(data)
    listed, _noise = counter.lines(data)
    want: dict = {}
    for _, _, match in listed:
        for kind, rules_hit in ((HitKind.PHASE_START, match.phase_starts),
                                (HitKind.PHASE_DONE, match.phase_dones)):
            for rule in rules_hit:
                want[(kind, rule)] = want.get((kind, rule), 0) + 1
        if match.noise is not None:
            key = (HitKind.NOISE, match.noise)
            want[key] = want.get(key, 0) + 1
    assert dict(counts) == want and matched == len(listed) == 4
    assert counts[(HitKind.NOISE, rules.noise[0])] == 2
    assert feed == [b"Pending 3 GPUs", b"step 4 - a"]
