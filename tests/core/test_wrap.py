"""Rows a terminal wrapped are joined before matching: a rule whose words span the cut
still hits, at the row where the record begins, and logs that are not wrapped are left as
they are."""

from __future__ import annotations

from pathlib import Path

from hangwatch.core.clock import FakeClock
from hangwatch.core.engine import Engine
from hangwatch.core.events import PhaseEvent
from hangwatch.core.prefilter import build_prefilter
from hangwatch.core.wrap import Unwrapper, physical
from hangwatch.packs.load import load_rule_set

RECORDS = [
    "2024-05-02 10:00:01 INFO starting the job on 8 nodes",
    "2024-05-02 10:00:02 INFO rank 0: initializing the process group with backend nccl, "
    "world size 16, master 10.0.0.1:29500, timeout 1800 seconds",
    "2024-05-02 10:00:09 INFO all ranks joined",
    "2024-05-02 10:00:10 INFO epoch 1 step 10 loss 2.31 lr 0.0003 grad_norm 1.2 "
    "throughput 812 tokens/s",
    "2024-05-02 10:00:12 INFO epoch 1 step 20 loss 2.12 lr 0.0003 grad_norm 1.1 "
    "throughput 815 tokens/s",
    "2024-05-02 10:00:14 INFO epoch 1 step 30 loss 2.05 lr 0.0003 grad_norm 1.0 "
    "throughput 814 tokens/s",
    "2024-05-02 10:00:20 INFO Saving model checkpoint to /ckpt/global_step30 with 8 shards",
    "2024-05-02 10:00:21 INFO writing shard 1 of 8",
]


def wrapped(records: list[str], width: int) -> bytes:
    """The records as a terminal of `width` columns shows them, one row a line."""
    rows = [record[i:i + width] for record in records for i in range(0, len(record), width)]
    return "".join(row + "\n" for row in rows).encode()


def test_a_log_cut_at_80_columns_is_taken_as_wrapped_and_its_records_joined():
    data = wrapped(RECORDS, 80)
    joined, rows = Unwrapper().feed(data)
    assert joined.decode().splitlines() == RECORDS
    # Records 2, 4, 5, 6 and 7 took two rows each: each joined row names its line.
    assert rows == [2, 4, 5, 6, 7]
    assert [physical(line, rows) for line in range(1, 9)] == [1, 2, 4, 5, 7, 9, 11, 13]


def test_a_row_that_begins_a_record_is_never_joined_onto_a_full_width_one():
    records = ["x" * 80, "2024-05-02 10:00:01 INFO next record"] * 4
    unwrapper = Unwrapper()
    data = "".join(r + "\n" for r in records).encode()
    assert unwrapper.feed(data) == (data, [])
    assert unwrapper.width is None


def test_logs_with_longer_lines_or_other_widths_are_not_wrapped():
    unwrapper = Unwrapper()
    data = wrapped(RECORDS, 80) + (b"y" * 81 + b"\n")  # a longer row: no terminal cut these
    assert unwrapper.feed(data) == (data, [])
    odd = wrapped(RECORDS, 77)  # 77 columns is no common terminal width
    assert Unwrapper().feed(odd) == (odd, [])


def test_a_phase_marker_cut_by_the_terminal_is_named_at_the_row_it_begins():
    head = "2024-05-02 10:00:19 INFO step 30 done, next: ".ljust(74, ".")
    records = [*RECORDS[:6], head + "Saving model checkpoint to /ckpt/global_step30",
               *RECORDS[7:]]
    data = wrapped(records, 80)
    rows = data.decode().splitlines()
    marker_row = next(i for i, row in enumerate(rows, 1) if row.endswith("Saving"))
    assert rows[marker_row].startswith(" model checkpoint")  # the words are cut apart
    rules = load_rule_set()
    for prefilter in (build_prefilter(rules), None):
        engine = Engine(rules, default_stall=600.0, clock=FakeClock(), prefilter=prefilter)
        events = engine.feed_block("train.log", data)
        saves = [e for e in events if isinstance(e, PhaseEvent)
                 and e.phase == "generic:checkpoint_save" and e.state == "started"]
        assert [e.line for e in saves] == [marker_row]
        assert engine.lines["train.log"] == len(rows)  # every row is read, none twice


def test_rules_test_explains_a_wrapped_record_at_its_first_row(tmp_path: Path):
    import io
    import json

    from hangwatch.cli import main

    log = tmp_path / "pasted.log"
    log.write_bytes(wrapped(RECORDS, 80))
    out = io.StringIO()
    status = main(["rules", "test", str(log), "--json", "--show", "matched"], out=out,
                  err=io.StringIO())
    assert status == 0
    report = json.loads(out.getvalue())
    shown = {line["line"]: line["text"] for line in report["lines"]}
    assert shown[11] == RECORDS[6]  # the save record, rows 11 and 12, joined
    rows = len(wrapped(RECORDS, 80).splitlines())
    assert report["summary"]["lines"] == len(RECORDS)
    assert report["summary"]["wrapped_rows"] == rows - len(RECORDS)


def test_the_same_full_width_line_again_and_again_or_rows_padded_to_the_width_are_no_wrap():
    # A wait loop whose line happens to be 150 characters long, and rich's console output
    # (every row padded with spaces to the terminal's width): joining would glue records.
    loop = ("Waiting in store based barrier to initialize process group for rank: 0, key: "
            "store_based_barrier_key:1 (world_size=4, worker_count=8, timeout=0:30:00)")
    assert len(loop) == 150
    padded = [row.ljust(132) for row in ("  INFO  colossalai - INFO:", "     /data/ctx.py:52",
                                         "     2 set_device", "  INFO  process rank 1")]
    for rows in ([loop] * 8, padded * 4):
        unwrapper = Unwrapper()
        data = "".join(row + "\n" for row in rows).encode()
        assert unwrapper.feed(data) == (data, [])
        assert unwrapper.width is None
