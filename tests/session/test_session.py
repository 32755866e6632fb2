"""The watch loop: producers' items in, events and incidents out, never blocked by evidence."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from hangwatch.core.clock import SystemClock
from hangwatch.core.engine import Engine
from hangwatch.core.events import Incident, Notice, PhaseEvent, StallEvent
from hangwatch.packs.load import load_rule_set
from hangwatch.reporters.base import View
from hangwatch.session.session import Session, SessionOptions
from hangwatch.sources.feed import Block, CaughtUp, EndOfInput


class Recorder:
    def __init__(self) -> None:
        self.events: list = []
        self.incidents: list[Incident] = []
        self.notices: list[Notice] = []
        self.views: list[View] = []

    def notice(self, notice):
        self.notices.append(notice)

    def event(self, event):
        self.events.append(event)

    def incident(self, incident):
        self.incidents.append(incident)

    def refresh(self, view):
        self.views.append(view)

    def close(self):
        pass


def session(tmp_path: Path, stall: float = 0.5, **kwargs) -> tuple[Session, Recorder]:
    recorder = Recorder()
    engine = Engine(load_rule_set(), default_stall=stall, clock=SystemClock())
    options = SessionOptions(report_dir=tmp_path / "reports", exit_on_stall=True)
    return Session(engine, [recorder], options, ["train.log"], **kwargs), recorder


def test_blocks_become_phase_events_and_end_of_input_ends_the_loop(tmp_path: Path):
    s, rec = session(tmp_path, stall=60)
    s.queue.put(Block("train.log", b"[ACTOR] init_model START\n[ACTOR] init_model DONE\n"))
    s.queue.put(EndOfInput())
    assert s.run() == 0
    assert [(e.phase, e.state) for e in rec.events if isinstance(e, PhaseEvent)] == [
        ("actor_init", "started"), ("actor_init", "completed")]


def test_stall_writes_incident_with_log_tail_and_exits_3(tmp_path: Path):
    s, rec = session(tmp_path)
    s.queue.put(Block("train.log", b"[SYNC] Starting weight synchronization\n"))
    started = time.monotonic()
    assert s.run() == 3
    assert time.monotonic() - started < 5
    [incident] = rec.incidents
    assert incident.stall.phase == "weight_sync"
    report = Path(incident.report or "")
    assert "[SYNC] Starting weight synchronization" in (report / "log-tail.txt").read_text()
    assert json.loads((report / "report.json").read_text())["stall"]["phase"] == "weight_sync"


def test_failing_evidence_collector_still_yields_a_report(tmp_path: Path):
    def broken(stall: StallEvent):
        raise RuntimeError("driver exploded")

    s, rec = session(tmp_path, collect=broken)
    s.queue.put(Block("train.log", b"[SYNC] Starting weight synchronization\n"))
    assert s.run() == 3
    [incident] = rec.incidents
    assert incident.report is not None
    assert any("driver exploded" in f for f in incident.findings)


def test_loop_keeps_consuming_while_evidence_is_gathered(tmp_path: Path):
    release = threading.Event()

    def slow(stall: StallEvent):
        release.wait(10)
        return None, [], ["slow evidence"]

    s, rec = session(tmp_path, collect=slow)
    s.queue.put(Block("train.log", b"[SYNC] Starting weight synchronization\n"))

    def later() -> None:
        time.sleep(1.0)  # the stall has fired and evidence is being gathered
        s.queue.put(Block("train.log", b"[SYNC] weights done\n"))
        time.sleep(0.3)
        release.set()

    threading.Thread(target=later, daemon=True).start()
    assert s.run() == 3
    kinds = [type(e).__name__ for e in rec.events]
    # The line that arrived during collection was processed before the incident was reported.
    assert kinds.index("StallEvent") < kinds.index("RecoveredEvent")
    assert rec.incidents[0].findings == ("slow evidence",)


def test_caught_up_on_old_log_backdates_the_stall(tmp_path: Path):
    s, rec = session(tmp_path, stall=600)
    s.queue.put(Block("train.log", b"[ACTOR] init_model START\n"))
    s.queue.put(CaughtUp("train.log", time.time() - 7200))
    assert s.run() == 3
    assert rec.incidents[0].stall.idle_s >= 7199


class Stuck:
    path = Path("/mnt/dead/train.log")

    def __init__(self) -> None:
        self.value = 0.0

    def stuck_for(self) -> float:
        return self.value


def test_stuck_reader_is_reported_unreadable_once_then_readable(tmp_path: Path):
    stuck = Stuck()
    s, rec = session(tmp_path, stall=60, watched=[stuck])
    stuck.value = 30.0
    s._check_stuck()
    s._check_stuck()
    stuck.value = 0.0
    s._check_stuck()
    assert [n.kind for n in rec.notices] == ["unreadable", "readable"]
    assert "stall timer keeps running" in rec.notices[0].message


def test_findings_evidence_and_advice_are_said_once_in_order(tmp_path: Path):
    from hangwatch.core.events import Advice
    from hangwatch.reporters.jsonl import incident_dict

    def repeats(stall: StallEvent):
        again = Advice(stall.advice[0].text, "evidence: same text as the phase's")
        return None, [again, Advice("look at the GPUs", "gpus=idle")], ["b", "a", "b", "a"]

    s, rec = session(tmp_path, collect=repeats)
    s.queue.put(Block("train.log", b"[SYNC] Starting weight synchronization\n"))
    assert s.run() == 3
    [incident] = rec.incidents
    assert incident.findings == ("b", "a")
    texts = [a.text for a in incident.advice]
    # the evidence-chosen advice first (most specific), then the phase's own
    assert len(texts) == len(set(texts)) and texts[0] == "look at the GPUs"
    evidence = incident_dict(incident)["evidence"]
    assert len(evidence) == len(set(evidence)) == 2  # the GPUs', then the phase's
    phase_because = incident.advice[1].because
    markdown = (Path(incident.report or "") / "report.md").read_text()
    assert markdown.count(phase_because) == 1


def test_the_report_path_is_absolute_when_the_report_dir_is_relative(tmp_path: Path,
                                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    recorder = Recorder()
    engine = Engine(load_rule_set(), default_stall=0.5, clock=SystemClock())
    s = Session(engine, [recorder], SessionOptions(report_dir=Path("reports"),
                                                   exit_on_stall=True), ["train.log"])
    s.queue.put(Block("train.log", b"[SYNC] Starting weight synchronization\n"))
    assert s.run() == 3
    report = Path(recorder.incidents[0].report or "")
    assert report.is_absolute() and report.parent == tmp_path / "reports"


@pytest.mark.parametrize("delay", [0.1, 0.3, 0.5, 0.7, 0.9])
def test_a_stall_precedes_its_recovery_in_every_output_when_progress_lands_during_evidence(
        tmp_path: Path, delay: float):
    import io

    from hangwatch.reporters.jsonl import JsonReporter
    from hangwatch.reporters.plain import PlainReporter

    stalled = threading.Event()

    def snapshot_taking_a_second(stall: StallEvent):
        stalled.set()
        time.sleep(1.0)
        return {"processes": []}, [], ["evidence taken"]

    json_out, plain_out = io.StringIO(), io.StringIO()
    recorder = Recorder()
    engine = Engine(load_rule_set(), default_stall=0.5, clock=SystemClock())
    s = Session(engine, [JsonReporter(json_out), PlainReporter(plain_out), recorder],
                SessionOptions(report_dir=tmp_path / "reports"), ["train.log"],
                collect=snapshot_taking_a_second)
    s.queue.put(Block("train.log", b"[SYNC] Starting weight synchronization\n"))

    def progress_after_the_stall() -> None:
        stalled.wait(10)
        time.sleep(delay)
        s.queue.put(Block("train.log", b"[SYNC] weights done\n"))
        s.queue.put(EndOfInput())

    threading.Thread(target=progress_after_the_stall, daemon=True).start()
    assert s.run() == 0
    s.close()
    kinds = [json.loads(line)["event"] for line in json_out.getvalue().splitlines()]
    assert kinds.index("stall") < kinds.index("recovered"), kinds
    plain = plain_out.getvalue()
    assert plain.index("STALL in phase weight_sync") < plain.index("recovered:")
    assert plain.index("evidence taken") < plain.index("recovered:")
    order = [type(e).__name__ for e in recorder.events]
    assert order.index("StallEvent") < order.index("RecoveredEvent")
    assert recorder.incidents[0].stall.phase == "weight_sync"
