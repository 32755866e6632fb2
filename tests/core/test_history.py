"""Learned durations: a phase running past 3x its usual time is called slow, once."""

from __future__ import annotations

import pytest

from hangwatch.core.clock import FakeClock
from hangwatch.core.engine import Engine
from hangwatch.core.events import SlowEvent, StallEvent
from hangwatch.core.history import KEPT, SLOW_FLOOR_S, History
from hangwatch.core.rules import RuleSet
from hangwatch.packs.load import load_pack_text

PACK = """
pack: t
phases:
  - id: rollout_init
    title: Rollout init
    start: 'ROLLOUT START'
    done: 'ROLLOUT DONE'
    stall_after: 20m
"""


def engine(history: History | None) -> tuple[Engine, FakeClock]:
    clock = FakeClock()
    e = Engine(RuleSet([load_pack_text(PACK, "t.yaml")]), default_stall=600.0, clock=clock,
               history=history)
    e.live = True
    return e, clock


def test_usual_is_the_95th_percentile_of_enough_runs():
    history = History()
    for took in (100, 110, 120):
        assert history.usual("p") is None or took == 120
        history.record("p", took)
    assert history.usual("p") == (120.0, 3)
    assert history.slow_after("p") == 360.0
    history.durations["q"] = [1.0, 1.0, 1.0]
    assert history.slow_after("q") == SLOW_FLOOR_S


def test_only_the_newest_runs_are_kept():
    history = History()
    for took in range(KEPT + 10):
        history.record("p", float(took))
    assert history.durations["p"][0] == 10.0 and len(history.durations["p"]) == KEPT


def test_a_phase_past_three_times_its_usual_is_slow_once_before_the_stall():
    e, clock = engine(History({"rollout_init": [120.0, 125.0, 130.0]}))
    e.feed_line("log", "ROLLOUT START")
    clock.advance(300)
    assert e.tick() == []
    assert e.seconds_to_deadline() == pytest.approx(90.0)
    clock.advance(100)
    [slow] = e.tick()
    assert isinstance(slow, SlowEvent)
    assert (slow.phase, slow.usual_s, slow.runs, slow.running_s) == ("rollout_init", 130.0, 3,
                                                                      400.0)
    clock.advance(100)
    assert e.tick() == []
    clock.advance(20 * 60)
    [stall] = e.tick()
    assert isinstance(stall, StallEvent)
    assert stall.usual == "rollout_init usually takes 2m10s (p95 of 3 runs); now 28m20s"


def test_completed_phases_teach_the_history_by_the_clock_when_live():
    e, clock = engine(History())
    e.feed_line("log", "ROLLOUT START")
    clock.advance(42)
    e.feed_line("log", "ROLLOUT DONE")
    assert e.history is not None and e.history.durations == {"rollout_init": [42.0]}


def test_a_catch_up_teaches_only_durations_printed_on_the_lines():
    e, _ = engine(History())
    e.live = False
    e.feed_line("log", "ROLLOUT START")
    e.feed_line("log", "ROLLOUT DONE")  # read at one instant: 0 s says nothing
    e.feed_line("log", "2026-01-11 10:00:00 ROLLOUT START")
    e.feed_line("log", "2026-01-11 10:02:10 ROLLOUT DONE")
    assert e.history is not None and e.history.durations == {"rollout_init": [130.0]}


def test_no_history_no_slow():
    e, clock = engine(None)
    e.feed_line("log", "ROLLOUT START")
    clock.advance(1000)
    assert e.tick() == []
