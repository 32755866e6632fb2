"""The wait-loop detector: repeated templates are output, advancing lines are progress."""

from __future__ import annotations

import pytest

from hangwatch.core.clock import FakeClock
from hangwatch.core.engine import Engine
from hangwatch.core.events import RecoveredEvent, StallEvent
from hangwatch.core.rules import RuleSet
from hangwatch.core.waits import WINDOW_LINES, WaitDetector, template


def judge_all(*lines: str, source: str = "log") -> list[bool]:
    detector = WaitDetector()
    return [detector.judge(source, i, text, float(i)).progress
            for i, text in enumerate(lines, 1)]


def test_identical_heartbeat_is_progress_once():
    assert judge_all(*["[worker] alive"] * 4) == [True, False, False, False]


def test_elapsed_time_ticking_is_not_progress():
    lines = [f"2026-01-11 10:00:{s:02d} Waiting for 3 workers... (elapsed: {s}s)"
             for s in range(10, 50, 10)]
    assert judge_all(*lines) == [True, False, False, False]


def test_waiting_line_with_a_changing_attempt_number_is_a_wait():
    lines = [f"still waiting for rank 3 (attempt {n})" for n in range(12, 16)]
    assert judge_all(*lines) == [True, False, False, False]


def test_waiting_line_whose_work_counter_advances_is_progress():
    lines = [f"waiting for batch {n} from the loader" for n in range(1, 4)]
    assert judge_all(*lines) == [True, True, True]


def test_step_lines_whose_loss_changes_are_progress():
    assert judge_all("epoch 1 loss 0.53", "epoch 1 loss 0.51", "epoch 1 loss 0.50") == [
        True, True, True]


def test_debug_trace_polling_a_key_repeats_in_a_short_cycle():
    cycle = ["[D socket.cpp:512] The client socket sent a get request for key 'rank_3'",
             "[D socket.cpp:530] The server has no value for key 'rank_3'; waiting 10 ms",
             "[D store.cpp:88] check key rank_3 -> 0"]
    verdicts = judge_all(*(cycle * 5))
    assert verdicts[:3] == [True, True, True]
    assert not any(verdicts[3:])


def test_two_actors_printing_the_same_wait_line_are_told_apart_by_pid():
    lines = ["(Worker pid=101) Waiting for weights", "(Worker pid=102) Waiting for weights",
             "(Worker pid=101) Waiting for weights"]
    assert judge_all(*lines) == [True, True, False]


def test_a_template_not_seen_within_the_window_is_new_again():
    detector = WaitDetector()
    assert detector.judge("log", 1, "heartbeat ok", 0.0).progress
    assert not detector.judge("log", 2, "heartbeat ok", 0.0).progress
    assert detector.judge("log", 3 + WINDOW_LINES, "heartbeat ok", 0.0).progress


def test_sources_have_windows_of_their_own():
    detector = WaitDetector()
    assert detector.judge("rank0.log", 1, "alive", 0.0).progress
    assert detector.judge("rank1.log", 1, "alive", 0.0).progress


def test_waits_are_counted_until_progress():
    detector = WaitDetector()
    for i in range(1, 6):
        detector.judge("log", i, f"still waiting for rank 3 (attempt {i})", float(i))
    [wait] = detector.waits()
    assert (wait.shown, wait.count, wait.last_s - wait.first_s) == (
        "still waiting for rank <n> (attempt <n>)", 4, 3.0)
    detector.progressed()
    assert detector.waits() == []


@pytest.mark.parametrize(("text", "kinds"), [
    ("step 12 loss 0.5", ["counter", "value"]),
    ("elapsed: 30 s, 4.5 it/s", ["time", "time"]),
    ("Writing checkpoint shard 3/8", ["counter", "value"]),
])
def test_numbers_are_classified_by_what_stands_around_them(text, kinds):
    assert [kind for kind, _ in template(text).values] == kinds


def test_engine_reports_a_wait_loop_no_rule_knows_as_a_stall_with_its_template():
    clock = FakeClock()
    engine = Engine(RuleSet([]), default_stall=60.0, clock=clock)
    engine.feed_line("train.log", "step 1 loss 2.0")
    for attempt in range(1, 40):
        clock.advance(2.0)
        assert engine.feed_line("train.log", f"still waiting for rank 3 (attempt {attempt})") == []
        engine.tick()
    stall = engine.stall
    assert isinstance(stall, StallEvent)
    [wait] = stall.waits[:1]
    assert wait.template == "still waiting for rank <n> (attempt <n>)"
    assert any("repeated" in a.because and "rank <n>" in a.because for a in stall.advice)
    [recovered] = engine.feed_line("train.log", "step 2 loss 1.9")
    assert isinstance(recovered, RecoveredEvent)


def test_engine_block_with_progress_then_repeats_has_progress():
    clock = FakeClock()
    engine = Engine(RuleSet([]), default_stall=60.0, clock=clock)
    engine.feed_block("log", b"alive\n")
    clock.advance(61)
    [stall] = engine.tick()
    [recovered] = engine.feed_block("log", b"alive\nalive\nsomething new\nalive\n")
    assert isinstance(stall, StallEvent) and recovered.line == 4
