"""The GitHub Actions annotation and step summary of a stall."""

from __future__ import annotations

import io
from pathlib import Path

from hangwatch.core.events import Advice, Incident, StallEvent
from hangwatch.reporters import github
from hangwatch.reporters.github import annotation, report, summary

REPORT_MD = """# Stall: Training loop (`train_loop`)

- **No progress for:** 1m05s (threshold 1m00s)

## Key findings

- pid 4242 (python): all_reduce (torch/distributed/distributed_c10d.py:3252)

## Stacks

### pid 4242 (python)

```text
Thread 4242 (idle): "MainThread"
```

## Log tail (last 1 lines)

```text
# not a heading: a line the job printed
```
"""


def incident(tmp_path: Path | None = None, phase: str | None = "train_loop") -> Incident:
    stall = StallEvent(phase=phase, phase_title="Training loop" if phase else None,
                       last_completed="dist_init", idle_s=65.0, threshold_s=60.0, wall=0.0)
    advice = (Advice("Find the rank that is not in the collective, 100% sure", "stack: pid 1 "
                     "in all_reduce"),)
    folder = None
    if tmp_path is not None:
        folder = tmp_path / "20260101T000000Z-train_loop"
        folder.mkdir()
        (folder / "report.md").write_text(REPORT_MD)
    return Incident(stall, str(folder) if folder else None, advice)


def test_annotation_names_phase_and_idle_time_with_properties_escaped(tmp_path):
    text = annotation(incident(tmp_path))
    assert text.startswith("::error title=hangwatch%3A stall in Training loop (train_loop)::")
    message = text.split("::", 2)[2]
    assert message.startswith("No progress for 1m05s (threshold 1m00s) in Training loop "
                              "(train_loop); last completed phase: dist_init.")
    assert "Advice: Find the rank that is not in the collective, 100%25 sure" in message
    assert message.endswith(f"Report: {tmp_path}/20260101T000000Z-train_loop")
    assert "\n" not in text


def test_annotation_without_a_phase_says_so():
    assert "stall in no known phase::" in annotation(incident(phase=None))


def test_summary_is_a_headline_over_the_incident_report_with_headings_one_level_down(tmp_path):
    text = summary(incident(tmp_path))
    assert text.startswith("## hangwatch: stalled in Training loop (train_loop)\n\n"
                           "No progress for **1m05s** (threshold 1m00s); the job was stopped.")
    assert "# Stall:" not in text  # the report's own title gives way to the headline
    assert "\n### Key findings\n" in text
    assert "- pid 4242 (python): all_reduce (torch/distributed/distributed_c10d.py:3252)" in text
    assert "\n#### pid 4242 (python)\n" in text
    assert "\n# not a heading: a line the job printed\n" in text


def test_summary_falls_back_to_the_advice_without_a_report():
    text = summary(incident())
    assert "- Find the rank that is not in the collective, 100% sure" in text
    assert "_because:_ `stack: pid 1 in all_reduce`" in text


def test_a_huge_report_is_cut_below_githubs_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(github, "SUMMARY_LIMIT", 200)
    text = summary(incident(tmp_path))
    assert "_Cut at 0 KiB: the whole report is in" in text
    assert "Log tail" not in text


def test_report_appends_the_summary_and_prints_the_annotation(tmp_path):
    path = tmp_path / "summary.md"
    path.write_text("# earlier\n")
    out = io.StringIO()
    report(incident(tmp_path), out=out, summary_path=str(path))
    assert out.getvalue().startswith("::error title=")
    assert path.read_text().startswith("# earlier\n## hangwatch: stalled in")


def test_an_unwritable_summary_is_a_warning_not_a_crash(tmp_path):
    out = io.StringIO()
    report(incident(), out=out, summary_path=str(tmp_path / "missing-dir" / "summary.md"))
    assert "::warning::hangwatch: cannot write the step summary" in out.getvalue()
