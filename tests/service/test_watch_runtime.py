"""One watch of serve, in process: real files and follower threads, its queue pumped by hand
the way the service's loop does it."""

from __future__ import annotations

import os
import queue
import time
from pathlib import Path

from hangwatch.core.clock import SystemClock
from hangwatch.core.events import BlindEvent, ReadableEvent, StallEvent
from hangwatch.packs.load import load_rule_set
from hangwatch.service.config import WatchConfig
from hangwatch.service.globs import GlobMatches, GlobScanner
from hangwatch.service.runtime import Outputs, WatchRuntime
from hangwatch.service.state import decode

PACK = "pack: t\nphases:\n  - id: load\n    start: 'LOAD START'\n    done: 'LOAD DONE'\n"


class Recorder:
    def __init__(self) -> None:
        self.events: list = []
        self.incidents: list = []

    def notice(self, notice) -> None:
        pass

    def event(self, event) -> None:
        self.events.append(event)

    def incident(self, incident) -> None:
        self.incidents.append(incident)

    def refresh(self, view) -> None:
        pass

    def close(self) -> None:
        pass


class Harness:
    def __init__(self, tmp_path: Path, logs: list[str], stall: float, saved=None) -> None:
        (tmp_path / "pack.yaml").write_text(PACK)
        self.shared: queue.Queue = queue.Queue(32)
        self.recorder = Recorder()
        config = WatchConfig(name="w", logs=tuple(logs), stall=stall, rules=(),
                             report_dir=tmp_path / "reports", snapshot=False)
        self.runtime = WatchRuntime(config, load_rule_set([tmp_path / "pack.yaml"]), None,
                                    shared=self.shared,
                                    make_reporters=lambda _r: Outputs([self.recorder]),
                                    clock=SystemClock(), watcher=None, poll=True, saved=saved)

    def put(self, item) -> None:
        self.shared.put(("w", item))

    def pump(self, until, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                _tag, item = self.shared.get(timeout=0.02)
                self.runtime.handle(item)
            except queue.Empty:
                pass
            self.runtime.clock_work()
            if until():
                return
        raise AssertionError(f"not within {timeout}s: {self.recorder.events}")

    def of(self, kind) -> list:
        return [e for e in self.recorder.events if isinstance(e, kind)]

    def close(self) -> None:
        self.runtime.close(time.monotonic() + 2)


def test_alerted_episode_is_kept_across_a_restart_and_not_reported_again(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("LOAD START\n")
    first = Harness(tmp_path, [str(log)], stall=0.3)
    first.pump(lambda: first.of(StallEvent) and first.recorder.incidents)
    episode = first.runtime.episode
    assert episode is not None and episode.reported
    first.runtime.mark_alerted(episode.id)
    saved = decode(first.runtime.snapshot(), "w")
    first.close()
    assert saved.episode.alerted

    again = Harness(tmp_path, [str(log)], stall=0.3, saved=saved)
    again.pump(lambda: again.runtime.ready)
    deadline = time.monotonic() + 1.0
    again.pump(lambda: time.monotonic() > deadline)
    assert again.of(StallEvent) == []
    assert (again.runtime.episode.id, again.runtime.episode.alerted) == (episode.id, True)
    assert again.runtime.engine.state()["stalled"]
    again.close()


def test_episode_whose_report_never_got_out_is_reported_after_the_restart(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("LOAD START\n")
    first = Harness(tmp_path, [str(log)], stall=0.3)
    first.pump(lambda: first.of(StallEvent))
    saved = decode(first.runtime.snapshot(), "w")  # killed while gathering evidence
    first.close()
    assert not saved.episode.reported

    again = Harness(tmp_path, [str(log)], stall=0.3, saved=saved)
    again.pump(lambda: again.recorder.incidents)
    [stall] = again.of(StallEvent)
    assert stall.phase == "load"
    assert again.runtime.episode.id == saved.episode.id  # the same episode, not a new one
    again.close()


def test_deleted_log_goes_blind_after_the_threshold_and_readable_when_recreated(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("LOAD START\n")
    h = Harness(tmp_path, [str(log)], stall=0.5)
    h.pump(lambda: h.runtime.ready)
    os.unlink(log)
    h.pump(lambda: h.of(BlindEvent))
    [blind] = h.of(BlindEvent)
    assert (blind.path, blind.what, blind.blind_s >= 0.5) == (str(log), "log", True)
    assert "disappeared" in blind.reason
    assert "BLIND (1)" in h.runtime.status()
    log.write_text("LOAD DONE\n")
    h.pump(lambda: h.of(ReadableEvent))
    assert h.of(ReadableEvent)[0].path == str(log)
    h.close()


def test_glob_that_matched_and_now_matches_none_goes_blind_once_for_all_its_logs(tmp_path):
    rank0 = tmp_path / "rank0.log"
    rank0.write_text("LOAD START\n")
    pattern = str(tmp_path / "rank*.log")
    h = Harness(tmp_path, [pattern], stall=0.5)
    assert not h.runtime.ready  # not before the glob was expanded once
    h.put(GlobMatches(pattern, (str(rank0),)))
    h.pump(lambda: h.runtime.ready)
    os.unlink(rank0)
    h.put(GlobMatches(pattern, ()))
    h.pump(lambda: h.of(BlindEvent))
    deadline = time.monotonic() + 3.0  # past the deleted notice and the threshold again
    h.pump(lambda: time.monotonic() > deadline)
    assert [(e.what, e.path) for e in h.of(BlindEvent)] == [("glob", pattern)]
    rank0.write_text("LOAD DONE\n")
    h.put(GlobMatches(pattern, (str(rank0),)))
    h.pump(lambda: h.of(ReadableEvent))
    assert h.of(ReadableEvent)[0].what == "glob"
    h.close()


def test_log_lost_briefly_and_back_before_the_threshold_is_not_blind(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("LOAD START\n")
    h = Harness(tmp_path, [str(log)], stall=30)
    h.pump(lambda: h.runtime.ready)
    os.unlink(log)
    time.sleep(2.5)  # the follower says "deleted" after its 2 s rotation grace
    log.write_text("LOAD DONE\n")
    h.pump(lambda: any(getattr(e, "state", "") == "completed" for e in h.recorder.events))
    assert h.of(BlindEvent) == [] and h.of(ReadableEvent) == []
    h.close()


def test_glob_scanner_reports_new_files_and_an_empty_match_from_its_own_thread(tmp_path):
    out: queue.Queue = queue.Queue()
    scanner = GlobScanner(every=0.05)
    pattern = str(tmp_path / "rank*.log")
    scanner.set({"w": (out, [pattern])})
    scanner.start()
    try:
        assert out.get(timeout=5) == GlobMatches(pattern, ())
        (tmp_path / "rank0.log").write_text("")
        (tmp_path / "rank1.dir.log").mkdir()  # a folder is not a log
        assert out.get(timeout=5) == GlobMatches(pattern, (str(tmp_path / "rank0.log"),))
    finally:
        scanner.stop()


def test_learned_phase_durations_are_kept_in_the_watch_state_across_a_restart(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("")
    first = Harness(tmp_path, [str(log)], stall=30.0)
    first.pump(lambda: first.runtime.ready)
    with log.open("a") as f:
        f.write("2026-01-11 10:00:00 LOAD START\n2026-01-11 10:02:10 LOAD DONE\n")
    first.pump(lambda: first.runtime.engine.history.durations.get("load") == [130.0])
    saved = decode(first.runtime.snapshot(), "w")
    first.close()
    assert saved.kept["history"] == {"durations": {"load": [130.0]}}

    again = Harness(tmp_path, [str(log)], stall=30.0, saved=saved)
    assert again.runtime.engine.history.durations == {"load": [130.0]}
    again.close()
