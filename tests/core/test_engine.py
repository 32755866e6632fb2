from __future__ import annotations

from hangwatch.core.clock import FakeClock
from hangwatch.core.engine import Engine
from hangwatch.core.events import PhaseEvent, RecoveredEvent, SignalEvent, StallEvent
from hangwatch.core.rules import RuleSet
from hangwatch.packs.load import load_pack_text

PACK = """
pack: t
phases:
  - id: load
    title: Load data
    start: 'Generating train split'
  - id: init
    title: Init
    start: 'init START'
    done: 'init DONE'
    stall_after: 60s
    advice: ["check the model path"]
  - id: sync
    title: Weight sync
    start: 'SYNC start'
    done: 'SYNC done'
    advice: ["raise NCCL_TIMEOUT"]
signals:
  - id: nccl_timeout
    match: 'Watchdog caught collective operation timeout'
    severity: error
    advice: ["a rank never joined"]
noise:
  - id: waiting
    match: 'Waiting for \\d+ workers'
progress:
  - id: steps
    match: 'step (?P<n>\\d+)'
    counter: n
  - id: beat
    match: 'alive \\(elapsed: (?P<t>\\d+)s\\)'
    heartbeat: true
finish:
  - id: done
    match: 'Training finished'
"""


def make(stall: float = 10.0) -> tuple[Engine, FakeClock]:
    clock = FakeClock()
    return Engine(RuleSet([load_pack_text(PACK, "t.yaml")]), default_stall=stall,
                  clock=clock), clock


def feed(engine: Engine, *lines: str) -> list:
    events = []
    for line in lines:
        events += engine.feed_line("train.log", line)
    return events


def test_stall_names_phase_in_progress_and_last_completed():
    engine, clock = make()
    feed(engine, "Generating train split: 0 examples", "init START", "init DONE", "SYNC start")
    clock.advance(9.9)
    assert engine.tick() == []
    clock.advance(0.1)
    [stall] = engine.tick()
    assert isinstance(stall, StallEvent)
    assert (stall.phase, stall.last_completed) == ("sync", "init")
    assert stall.idle_s == 10.0
    assert [a.text for a in stall.advice] == ["raise NCCL_TIMEOUT"]
    assert "phase sync" in stall.advice[0].because


def test_stall_fires_once_per_episode_and_recovers_on_progress():
    engine, clock = make()
    feed(engine, "SYNC start")
    clock.advance(11)
    assert len(engine.tick()) == 1
    clock.advance(100)
    assert engine.tick() == []
    [recovered] = feed(engine, "some real output")
    assert isinstance(recovered, RecoveredEvent)
    assert recovered.phase == "sync" and recovered.stalled_s == 100
    clock.advance(10)
    assert len(engine.tick()) == 1  # a second episode fires again


def test_noise_lines_are_not_progress():
    engine, clock = make()
    feed(engine, "SYNC start")
    for _ in range(20):
        clock.advance(1)
        feed(engine, "Waiting for 3 workers... (elapsed: 600s)")
    assert isinstance(engine.tick()[0], StallEvent)


def test_counter_must_grow_to_count_as_progress():
    engine, clock = make()
    feed(engine, "step 100")
    clock.advance(6)
    feed(engine, "step 100")  # same count printed again: not progress
    clock.advance(4)
    assert len(engine.tick()) == 1
    assert isinstance(feed(engine, "step 101")[0], RecoveredEvent)


def test_heartbeat_with_only_elapsed_time_changing_is_not_progress():
    engine, clock = make()
    feed(engine, "alive (elapsed: 10s)")
    for t in range(11, 25):
        clock.advance(1)
        feed(engine, f"alive (elapsed: {t}s)")
    assert len(engine.tick()) == 1


def test_phase_stall_after_overrides_default_threshold():
    engine, clock = make(stall=10)
    feed(engine, "init START")
    assert engine.threshold() == 60
    clock.advance(30)
    assert engine.tick() == []  # quiet but healthy: the phase allows 60 s
    clock.advance(30)
    assert len(engine.tick()) == 1


def test_signal_is_evidence_not_progress_and_its_advice_joins_the_stall():
    engine, clock = make()
    feed(engine, "SYNC start")
    clock.advance(5)
    [signal] = feed(engine, "[rank1] Watchdog caught collective operation timeout: ...")
    assert isinstance(signal, SignalEvent) and signal.severity == "error"
    clock.advance(5)
    [stall] = engine.tick()
    assert "a rank never joined" in [a.text for a in stall.advice]
    assert any("signal nccl_timeout at train.log:2" in a.because for a in stall.advice)


def test_repeated_signal_is_reported_at_most_every_ten_seconds_but_counted():
    engine, clock = make()
    line = "Watchdog caught collective operation timeout"
    events = feed(engine, line, line, line)
    assert len(events) == 1
    clock.advance(10)
    assert len(feed(engine, line)) == 1
    assert engine.signals["nccl_timeout"].count == 4


def test_finish_stops_the_stall_timer():
    engine, clock = make()
    feed(engine, "SYNC start", "SYNC done", "Training finished", "ray shutting down")
    clock.advance(1000)
    assert engine.tick() == []
    assert engine.finished is not None


def test_overlapping_phases_keep_the_newest_open_one_current():
    engine, _ = make()
    events = feed(engine, "init START", "SYNC start", "init DONE")
    assert [(e.phase, e.state) for e in events if isinstance(e, PhaseEvent)] == [
        ("init", "started"), ("sync", "started"), ("init", "completed")]
    state = engine.state()
    assert state["phase"] == "sync" and state["last_completed"] == "init"


def test_phase_without_done_ends_when_next_phase_starts():
    engine, _ = make()
    events = feed(engine, "Generating train split: 0 examples", "init START")
    assert [(e.phase, e.state) for e in events] == [
        ("load", "started"), ("load", "completed"), ("init", "started")]


def test_repeated_start_from_every_rank_counts_once():
    engine, _ = make()
    events = feed(engine, "init START", "init START", "init DONE", "init DONE")
    assert [(e.phase, e.state) for e in events] == [("init", "started"), ("init", "completed")]


def test_backdated_quiet_log_stalls_at_once():
    engine, _ = make(stall=10)
    feed(engine, "SYNC start")
    engine.backdate(3600)
    [stall] = engine.tick()
    assert stall.idle_s >= 3600


def test_feed_block_decodes_invalid_utf8_and_counts_lines():
    engine, _ = make()
    events = engine.feed_block("train.log", b"\xff\xfe init START\nplain\x00line\n")
    assert [e.phase for e in events] == ["init"]
    assert engine.lines["train.log"] == 2


def test_generic_advice_when_no_phase_matched():
    engine, clock = make()
    feed(engine, "hello")
    clock.advance(10)
    [stall] = engine.tick()
    assert stall.phase is None and "py-spy dump" in stall.advice[0].text
    assert "PYTHONUNBUFFERED" in stall.advice[1].text
    assert "no phase marker seen yet" in stall.advice[0].because


def test_stall_between_phases_names_the_last_completed_one():
    engine, clock = make()
    feed(engine, "init START", "init DONE")
    clock.advance(10)
    [stall] = engine.tick()
    assert stall.phase is None and stall.last_completed == "init"
    assert "no phase open; last completed init" in stall.advice[0].because


def test_counter_going_down_is_a_new_pass_and_counts():
    engine, clock = make()
    feed(engine, "step 500")
    clock.advance(9)
    feed(engine, "step 0")  # next epoch restarts the count
    clock.advance(9)
    assert engine.tick() == []


def test_repeated_phase_start_line_is_judged_by_its_counter():
    pack = load_pack_text(
        "pack: s\nphases:\n  - id: train\n    start: 'step \\d+ loss'\n"
        "progress:\n  - id: steps\n    match: 'step (?P<n>\\d+) loss'\n    counter: n\n",
        "s.yaml")
    clock = FakeClock()
    engine = Engine(RuleSet([pack]), default_stall=10, clock=clock)
    engine.feed_line("l", "step 1 loss 0.5")
    clock.advance(5)
    engine.feed_line("l", "step 1 loss 0.5")  # the same step printed again: not progress
    clock.advance(5)
    assert len(engine.tick()) == 1


def test_a_phase_event_is_a_frozen_dataclass_its_own_init_fills_every_field():
    """PhaseEvent's __init__ is written by hand (cheaper than the generated one): it takes
    the fields in their order, with their defaults, and the event stays frozen."""
    import dataclasses
    import inspect

    import pytest

    fields = dataclasses.fields(PhaseEvent)
    params = list(inspect.signature(PhaseEvent.__init__).parameters.values())[1:]
    assert [(p.name, p.default) for p in params] == [
        (f.name, inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default)
        for f in fields]
    event = PhaseEvent("p", "P", "started", "a.log", 3, 1.0)
    assert dataclasses.asdict(event) == {"phase": "p", "title": "P", "state": "started",
                                         "source": "a.log", "line": 3, "wall": 1.0,
                                         "stamp": None, "parent": None}
    assert dataclasses.replace(event, wall=2.0) == PhaseEvent("p", "P", "started", "a.log", 3,
                                                              2.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.line = 4  # type: ignore[misc]
