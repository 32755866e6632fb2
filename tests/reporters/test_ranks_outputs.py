"""Ranks in every output: JSON Lines, plain lines, the live per-rank table (short for 64
ranks), the stall panel, the report, and `check`."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

from rich.console import Console

from hangwatch.cli import main
from hangwatch.core.events import Incident, Laggard, RankRow, StallEvent
from hangwatch.reporters.base import View
from hangwatch.reporters.console import ConsoleReporter
from hangwatch.reporters.incident import write_incident
from hangwatch.reporters.jsonl import JsonReporter
from hangwatch.reporters.plain import PlainReporter
from hangwatch.reporters.ranks import grouped

LAG = Laggard("logs/rank2.log", 2, "train_loop", 95.0, 5, "at step 5 while ranks 0,1,3 reached "
              "step 8")
ROWS = tuple(RankRow(r, f"logs/rank{r}.log", "train_loop", 5 if r == 2 else 8,
                     95.0 if r == 2 else 3.0, f"step {5 if r == 2 else 8} loss 0.1", r == 2)
             for r in range(4))
STALL = StallEvent("train_loop", "Training loop", "dist_init", 600.0, 600.0, 0.0,
                   laggards=(LAG,), ranks=ROWS,
                   rank_summary=f"held up by rank 2: {LAG.why}",
                   desync="ranks 0,1,3 in ALLREDUCE SeqNum 9; rank 2 in ALLREDUCE SeqNum 7: "
                          "rank 2 diverged")
INCIDENT = Incident(STALL, "/reports/x", ())


def test_json_lines_stall_names_the_laggards():
    out = io.StringIO()
    JsonReporter(out).incident(INCIDENT)
    stall = json.loads(out.getvalue())
    assert stall["laggards"] == [{"source": "logs/rank2.log", "rank": 2, "phase": "train_loop",
                                  "last_progress_s": 95.0, "counter": 5, "why": LAG.why}]
    assert stall["rank_summary"] == f"held up by rank 2: {LAG.why}"
    assert stall["desync"].endswith("rank 2 diverged")


def test_plain_stall_says_who_holds_the_job_up():
    out = io.StringIO()
    PlainReporter(out, now=lambda: 0.0).incident(INCIDENT)
    text = out.getvalue()
    assert f"laggard: rank 2 (rank2.log): {LAG.why}" in text
    assert "collectives: ranks 0,1,3 in ALLREDUCE SeqNum 9" in text


def test_table_of_64_ranks_groups_equal_ranks_and_shows_the_odd_ones():
    rows = [RankRow(r, "train.log", "train_loop", 812, 4.0, "", False).to_dict()
            for r in range(64)]
    rows[17] = RankRow(17, "train.log", "data_load", 640, 300.0, "", True).to_dict()
    rows[40] = RankRow(40, "train.log", "train_loop", 811, 5.0, "", False).to_dict()
    assert grouped(rows) == [("17*", "data_load", "640", "5m00s"),
                             ("40", "train_loop", "811", "5s"),
                             ("0-16,18-39,41-63", "train_loop", "812", "4s")]


def test_a_row_of_many_named_ranks_lists_two_and_counts_the_rest():
    # Ray's actor labels hold commas of their own: joined by commas they ran together.
    rows = [RankRow(f"WorkerDict pid={3000 + n}, ip=10.0.0.1", "train.log", "train_loop", 8,
                    4.0, "", False).to_dict() for n in range(26)]
    rows.append(RankRow("TaskRunner pid=410", "train.log", "data_load", 3, 90.0, "",
                        False).to_dict())
    assert grouped(rows) == [
        ("TaskRunner pid=410", "data_load", "3", "1m30s"),
        ("WorkerDict pid=3000, ip=10.0.0.1; WorkerDict pid=3001, ip=10.0.0.1 and 24 more",
         "train_loop", "8", "4s")]


def test_live_view_shows_the_rank_table_when_there_is_more_than_one_rank():
    buffer = io.StringIO()
    console = Console(file=buffer, width=120, force_terminal=False)
    reporter = ConsoleReporter(buffer, now=lambda: 0.0, console=console)
    state = {"phase": "train_loop", "phase_title": "Training loop", "phase_since_wall": None,
             "last_completed_title": None, "idle_s": 3.0, "threshold_s": 600.0,
             "stalled": False, "finished": False, "lines": {"t": 10}, "timeline": [],
             "ranks": [row.to_dict() for row in ROWS]}
    reporter.refresh(View(state, ("t",)))
    reporter.incident(INCIDENT)
    reporter.close()
    text = buffer.getvalue()
    assert "ranks" in text and "0,1,3" in text and "2*" in text
    assert f"laggard: rank 2 (rank2.log): {LAG.why}" in text


def test_report_shows_the_ranks_and_the_laggards_stack(tmp_path):
    processes = [{"pid": 40 + r, "name": "python", "rank": str(r), "env": {"RANK": str(r)},
                  "stack": "load_batch (train.py:9)" if r == 2 else "all_reduce (c10d.py:1)"}
                 for r in range(4)]
    folder = write_incident(tmp_path, stall=STALL, timeline=[], log_tail=[], sources=["x"],
                            snapshot={"processes": processes}, advice=[])
    markdown = (folder / "report.md").read_text()
    section = markdown.split("## Ranks", 1)[1].split("\n## ", 1)[0]
    assert "| `2`\\* | train_loop | 5 | 1m35s |" in section  # Markdown shows 2*
    assert "| `0,1,3` | train_loop | 8 | 3s |" in section
    laggard = section.split("### `rank 2", 1)[1]
    assert "pid 42 rank 2 (python)" in laggard and "load_batch (train.py:9)" in laggard
    assert "all_reduce" not in laggard
    report = json.loads((folder / "report.json").read_text())
    assert report["stall"]["laggards"][0]["rank"] == 2


def check(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", *args], out, err)
    return status, out.getvalue() + err.getvalue()


def rank_files(folder: Path, steps: dict[int, int], ages: dict[int, float]) -> list[str]:
    paths = []
    for rank, last in steps.items():
        path = folder / f"rank{rank}.log"
        path.write_text(f"init_process_group(backend=nccl, world_size={len(steps)})\n"
                        + "".join(f"step {s} loss 0.1\n" for s in range(1, last + 1)))
        then = time.time() - ages.get(rank, 3600)
        os.utime(path, (then, then))
        paths.append(str(path))
    return paths


def test_check_json_names_the_rank_behind(tmp_path):
    status, text = check(*rank_files(tmp_path, {0: 8, 1: 8, 2: 5, 3: 8}, {}), "--json")
    assert status == 3
    data = json.loads(text)
    assert [(lag["rank"], lag["counter"]) for lag in data["laggards"]] == [(2, 5)]
    assert [row["counter"] for row in data["ranks"]] == [8, 8, 5, 8]
    assert data["rank_summary"].startswith("held up by rank 2")


def test_check_names_the_rank_whose_file_went_quiet_first(tmp_path):
    files = rank_files(tmp_path, {0: 8, 1: 8, 2: 8}, {0: 3600, 1: 3590, 2: 3 * 3600})
    status, text = check(*files)
    assert status == 3
    assert ("laggard: rank 2 (rank2.log): silent for 3h00m; the others made progress until "
            "59m5") in text


def test_check_all_ranks_equal_says_stuck_as_a_whole(tmp_path):
    status, text = check(*rank_files(tmp_path, {0: 8, 1: 8, 2: 8, 3: 8}, {}))
    assert status == 3
    assert "ranks: no rank stands out among 4 ranks (step 8, in train_loop): the job is " \
           "stuck as a whole" in text
    assert "0-3" in text


def test_github_annotation_names_the_laggard():
    from hangwatch.reporters.github import annotation

    assert f"Ranks: held up by rank 2: {LAG.why}." in annotation(INCIDENT)
