"""The GitHub Actions annotation and step summary, from a stall and a snapshot."""

from __future__ import annotations

import io

from hangwatch.core.events import Advice, Incident, StallEvent
from hangwatch.reporters.github import annotation, report, summary

BLOCKED_RANK = """Thread 4242 (idle): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:3252)
    wrapper (torch/distributed/c10d_logger.py:81)
    train (train.py:55)
    _wrap (torch/multiprocessing/spawn.py:90)
"""


def incident(phase: str | None = "train_steps", report_path: str | None = "reports/x") -> Incident:
    stall = StallEvent(phase=phase, phase_title="Training steps" if phase else None,
                       last_completed="dist_init", idle_s=65.0, threshold_s=60.0, wall=0.0)
    advice = (Advice("Find the rank that is not in the collective, 100% sure", "stack: pid 1 "
                     "in all_reduce | rank 0"),)
    return Incident(stall, report_path, advice, ("pid 4242 rank 0 (python): all_reduce",))


TIMELINE = [{"phase": "dist_init", "title": "Distributed init", "state": "completed",
             "line": 1, "duration_s": 2.5},
            {"phase": "train_steps", "title": "Training steps", "state": "running",
             "line": 3, "duration_s": None}]
SNAPSHOT = {"processes": [
    {"pid": 4242, "name": "python", "env": {"RANK": "0"}, "stack": BLOCKED_RANK},
    {"pid": 4243, "name": "python", "stack": None, "stack_error": "exited"},
]}


def test_annotation_names_phase_and_idle_time_with_properties_escaped():
    text = annotation(incident())
    assert text.startswith("::error title=hangwatch%3A stall in Training steps (train_steps)::")
    message = text.split("::", 2)[2]
    assert message.startswith("No progress for 1m05s (threshold 1m00s) in Training steps "
                              "(train_steps); last completed phase: dist_init.")
    assert "Advice: Find the rank that is not in the collective, 100%25 sure" in message
    assert message.endswith("Report: reports/x")
    assert "\n" not in text


def test_annotation_without_a_phase_says_so():
    assert "stall in no known phase::" in annotation(incident(phase=None))


def test_summary_has_timeline_waiting_frames_and_advice():
    text = summary(incident(), timeline=TIMELINE, snapshot=SNAPSHOT)
    assert text.startswith("## hangwatch: stalled in Training steps (train_steps)\n")
    assert "| Distributed init (`dist_init`) | completed | 1 | 2s |" in text
    assert "| Training steps (`train_steps`) | running | 3 | - |" in text
    assert ("| pid 4242 rank 0 (python) | `all_reduce (torch/distributed/distributed_c10d.py"
            ":3252)` |") in text
    assert "pid 4243" not in text  # no stack, nothing telling to show
    assert "- Find the rank that is not in the collective, 100% sure" in text
    assert "_because: stack: pid 1 in all_reduce \\| rank 0_" in text


def test_summary_keeps_only_the_newest_timeline_rows():
    timeline = [{**TIMELINE[0], "line": n} for n in range(1, 51)]
    text = summary(incident(), timeline=timeline, snapshot=None)
    assert "_30 earlier entries not shown._" in text
    assert "| 50 |" in text and "| 30 |" not in text


def test_report_appends_the_summary_and_prints_the_annotation(tmp_path):
    path = tmp_path / "summary.md"
    path.write_text("# earlier\n")
    out = io.StringIO()
    report(incident(), timeline=TIMELINE, snapshot=SNAPSHOT, out=out, summary_path=str(path))
    assert out.getvalue().startswith("::error title=")
    assert path.read_text().startswith("# earlier\n## hangwatch: stalled in")


def test_an_unwritable_summary_is_a_warning_not_a_crash(tmp_path):
    out = io.StringIO()
    report(incident(), timeline=[], snapshot=None, out=out,
           summary_path=str(tmp_path / "missing-dir" / "summary.md"))
    assert "::warning::hangwatch: cannot write the step summary" in out.getvalue()
