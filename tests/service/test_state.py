"""What a watch keeps across restarts: the file format, files set aside, the writer thread,
and the engine's phases and stall timer put back."""

from __future__ import annotations

import json

from hangwatch.core.clock import FakeClock
from hangwatch.core.engine import Engine
from hangwatch.core.phases import PhaseTracker
from hangwatch.packs.load import load_rule_set
from hangwatch.service.state import (
    Episode,
    StateStore,
    StateWriter,
    WatchState,
    decode,
    encode,
)
from hangwatch.sources.feed import FilePos

LINES = (b"[ACTOR] init_model START\n[ACTOR] init_model DONE\n"
         b"[ROLLOUT] init_model START\n[SYNC] Starting weight synchronization\n")


def engine(clock: FakeClock) -> Engine:
    return Engine(load_rule_set(), default_stall=60, clock=clock)


def test_state_round_trips_through_its_file_format():
    state = WatchState("w", {"/l/rank0.log": FilePos(1, 2, "ab", 30)}, {"any": 1},
                       Episode("w-1-x", 5.0, "weight_sync", reported=True, alerted=True), 9.5)
    assert decode(encode(state), "w") == state


def test_corrupt_and_foreign_state_files_are_set_aside_with_a_warning(tmp_path):
    store = StateStore(tmp_path)
    store.path("a").write_text('{"version": 1, "files": ')
    store.path("b").write_text(json.dumps({"version": 0, "hangwatch": "0.0.1"}))
    store.path("c").write_text(json.dumps({"version": 1, "files": {"x": {"dev": 1}},
                                           "engine": None, "episode": None, "saved_wall": 0}))
    for watch, why in (("a", "not JSON"), ("b", "another hangwatch (0.0.1"),
                       ("c", "malformed")):
        state, warning = store.load(watch)
        assert state is None and why in warning and "set aside as" in warning
        assert not store.path(watch).exists()
        assert len(list(tmp_path.glob(f"{watch}.json.bad-*"))) == 1
    assert store.load("never-saved") == (None, None)


def test_writer_thread_writes_the_newest_state_atomically(tmp_path):
    writer = StateWriter(StateStore(tmp_path / "state"))
    for n in range(50):
        writer.submit("w", json.dumps({"n": n}).encode())
    assert writer.stop(5)
    assert json.loads((tmp_path / "state" / "w.json").read_text()) == {"n": 49}
    assert [p.name for p in (tmp_path / "state").iterdir()] == ["w.json"]  # no temp left


def test_writer_tells_once_that_it_cannot_save(tmp_path):
    (tmp_path / "state").write_text("a file where the folder should be")
    writer = StateWriter(StateStore(tmp_path / "state"))
    writer.submit("w", b"{}")
    writer.flush(5)
    writer.submit("w", b"{}")
    writer.stop(5)
    assert len(writer.problems) == 1 and "cannot save state" in writer.problems[0]


def test_engine_phases_lines_and_idle_time_come_back_after_time_away():
    clock = FakeClock()
    before = engine(clock)
    before.feed_block("rank0.log", LINES)
    clock.advance(30)
    snapshot = json.loads(json.dumps(before.snapshot()))  # through the file format

    after = engine(FakeClock(start=1000.0))
    after.restore(snapshot, away_s=20, stalled=True)
    assert after.state()["phase"] == "weight_sync"
    assert after.state()["last_completed"] == "actor_init"
    assert after.lines == {"rank0.log": 4}
    assert after.timeline() == before.timeline()
    assert after.idle() == 50  # 30 s before the save, 20 s away
    assert after.seconds_to_deadline() == 10


def test_a_stall_in_progress_stays_fired_and_ends_with_recovered():
    clock = FakeClock()
    before = engine(clock)
    before.feed_block("rank0.log", LINES)
    clock.advance(61)
    assert before.tick()
    snapshot = before.snapshot()

    after = engine(FakeClock(start=500.0))
    after.restore(snapshot, away_s=5, stalled=True)
    assert after.tick() == [] and after.state()["stalled"]
    [recovered] = after.feed_block("rank0.log", b"[SYNC] Weight synchronization done\n")[-1:]
    assert recovered.phase == "weight_sync" and recovered.stalled_s >= 5


def test_tracker_from_dict_drops_open_phases_that_todays_rules_no_longer_have():
    clock = FakeClock()
    e = engine(clock)
    e.feed_block("rank0.log", LINES)
    data = e.tracker.to_dict()
    tracker = PhaseTracker.from_dict(data, lambda pid: None if pid == "weight_sync"
                                     else e.rules.phase(pid))
    assert tracker.current is not None and tracker.current.id == "rollout_init"
    assert len(tracker.timeline) == len(e.tracker.timeline)
