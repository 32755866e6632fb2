"""How far a catch-up has read: the text the live screen shows, and `check`'s bar on a
terminal's stderr (a real pseudo-terminal), absent when stderr is not a terminal."""

from __future__ import annotations

import io
import os
import pty
import time
from pathlib import Path

from hangwatch.cli import main
from hangwatch.core.clock import SystemClock
from hangwatch.core.engine import Engine
from hangwatch.packs.load import load_rule_set
from hangwatch.reporters.progress import ReadProgress
from hangwatch.session.session import Session, SessionOptions
from hangwatch.sources.feed import Block, CaughtUp, FilePos
from tests.session.test_session import Recorder


def test_text_gives_share_read_size_and_time_left_from_the_rate_so_far():
    progress = ReadProgress("train.log")
    progress.update(0, 1_200_000_000, now=100.0)
    assert progress.text() == "reading train.log: 0 % of 1.2 GB"  # no rate yet
    progress.update(444_000_000, 1_200_000_000, now=105.3)
    assert progress.text() == "reading train.log: 37 % of 1.2 GB, 9 s left"


def big_log(tmp_path: Path) -> Path:
    log = tmp_path / "train.log"
    line = "gpu-node-00:31000:31040 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1\n"
    log.write_text("[SYNC] Starting weight synchronization\n" + line * 40_000)
    then = time.time() - 3600
    os.utime(log, (then, then))
    return log


def test_check_draws_a_bar_on_a_terminal_stderr_and_wipes_it(tmp_path: Path):
    log = big_log(tmp_path)
    master, slave = pty.openpty()
    try:
        with open(slave, "w", encoding="utf-8", closefd=False) as err:
            out = io.StringIO()
            assert main(["check", str(log)], out, err) == 3
        os.set_blocking(master, False)
        drawn = os.read(master, 1 << 16).decode()
    finally:
        os.close(master)
        os.close(slave)
    assert "reading train.log: " in drawn and "% of 3.2 MB" in drawn
    assert drawn.endswith("\r\x1b[K")  # the bar is gone before the verdict is read
    assert "STALLED" in out.getvalue()


def test_check_draws_no_bar_when_stderr_is_not_a_terminal(tmp_path: Path):
    out, err = io.StringIO(), io.StringIO()
    assert main(["check", str(big_log(tmp_path))], out, err) == 3
    assert err.getvalue() == ""


def test_live_view_says_how_far_each_file_is_read_until_caught_up(tmp_path: Path):
    log = tmp_path / "train.log"
    log.write_bytes(b"x\n" * 1000)
    recorder = Recorder()
    engine = Engine(load_rule_set(), default_stall=600, clock=SystemClock())
    session = Session(engine, [recorder], SessionOptions(report_dir=tmp_path, refresh_s=0.0),
                      [str(log)])
    stat = log.stat()
    for upto in (500, 1000):
        session.turn(Block(str(log), b"x\n" * 250, FilePos(stat.st_dev, stat.st_ino, "", upto)))
        time.sleep(0.11)  # past the redraw limit
        session.turn()
    reading = [v.reading for v in recorder.views if v.reading]
    assert reading[0] == ("reading train.log: 25 % of 2.0 KB",)
    assert reading[-1][0].startswith("reading train.log: 50 % of 2.0 KB, ")
    session.turn(CaughtUp(str(log), stat.st_mtime))
    time.sleep(0.11)
    session.turn()
    assert recorder.views[-1].reading == ()
