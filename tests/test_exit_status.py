"""The exit status of every command, as the tables of README.md and
docs/reference/exit-codes.md give it, and what a reader that goes away (`| head`) does to
each: a quiet exit 141, as a shell reports for `cat` or `grep` ended by SIGPIPE, except for
`run`, whose status stays the job's."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hangwatch.cli import main

ROOT = Path(__file__).resolve().parents[1]
FINISHED = "[ACTOR] init_model START\n[ACTOR] init_model DONE\nTraining finished\n"
STALLED = "[SYNC] Starting weight synchronization\n"
BAD_PACK = "pack: bad\nphases:\n  - id: x\n"


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT),
                                                         os.environ.get("PYTHONPATH", "")])}


def old_log(path: Path, text: str) -> Path:
    path.write_text(text)
    past = time.time() - 3600
    os.utime(path, (past, past))
    return path


def status_of(*argv: str) -> int:
    return main(list(argv), io.StringIO(), io.StringIO())


# --- the table -------------------------------------------------------------------------------

def test_check_exits_0_when_finished_3_when_stalled_2_on_bad_input(tmp_path: Path):
    assert status_of("check", str(old_log(tmp_path / "done.log", FINISHED))) == 0
    assert status_of("check", str(old_log(tmp_path / "hung.log", STALLED))) == 3
    assert status_of("check", str(tmp_path / "missing.log")) == 2
    (tmp_path / "bad.yaml").write_text(BAD_PACK)
    assert status_of("check", str(tmp_path / "done.log"), "--rules",
                     str(tmp_path / "bad.yaml")) == 2


def test_rules_exits_0_or_2_on_bad_input(tmp_path: Path):
    log = old_log(tmp_path / "done.log", FINISHED)
    (tmp_path / "bad.yaml").write_text(BAD_PACK)
    assert status_of("rules", "list") == 0
    assert status_of("rules", "show", "no-such-pack") == 2
    assert status_of("rules", "lint", str(tmp_path / "bad.yaml")) == 2
    assert status_of("rules", "test", str(log)) == 0
    assert status_of("rules", "test", str(tmp_path / "missing.log")) == 2
    assert status_of("rules", "test", str(log), "--show", "sideways") == 2


def test_watch_exits_3_on_a_stall_with_exit_on_stall_and_2_on_a_bad_rule_file(tmp_path: Path):
    log = old_log(tmp_path / "hung.log", STALLED)
    assert status_of("watch", str(log), "--stall", "1s", "--exit-on-stall", "--no-snapshot",
                     "--report-dir", str(tmp_path / "reports")) == 3
    (tmp_path / "bad.yaml").write_text(BAD_PACK)
    assert status_of("watch", str(log), "--rules", str(tmp_path / "bad.yaml")) == 2


def test_snapshot_exits_2_when_its_report_dir_cannot_be_written(tmp_path: Path):
    (tmp_path / "a-file").write_text("")
    err = io.StringIO()
    status = main(["snapshot", "--no-stacks", "--report-dir", str(tmp_path / "a-file")],
                  io.StringIO(), err)
    assert status == 2
    assert "cannot write the snapshot" in err.getvalue()


def test_usage_errors_and_mistyped_commands_exit_2():
    assert status_of("check") == 2
    assert status_of("chek", "train.log") == 2
    assert status_of("run") == 2


# --- a reader that goes away -----------------------------------------------------------------

def to_closed_pipe(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """hangwatch with its stdout a pipe nobody reads any more."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "hangwatch", *argv], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=timeout, env=env())
    finally:
        os.close(write)


@pytest.mark.parametrize("argv", [
    ["check", "{log}", "--json"],
    ["check", "{log}"],
    ["rules", "test", "{log}", "--show", "all"],
    ["rules", "list"],
    ["snapshot", "--no-stacks"],
], ids=["check --json", "check", "rules test", "rules list", "snapshot"])
def test_a_closed_pipe_ends_a_command_quietly_with_141(tmp_path: Path, argv: list[str]):
    log = old_log(tmp_path / "done.log", FINISHED)
    done = to_closed_pipe(*[a.format(log=log) for a in argv])
    assert (done.returncode, done.stderr) == (141, "")


def test_a_live_watch_whose_reader_goes_away_stops_with_141(tmp_path: Path):
    log = tmp_path / "train.log"
    log.write_text("[ACTOR] init_model START\n")
    proc = subprocess.Popen([sys.executable, "-m", "hangwatch", str(log), "--json",
                             "--no-snapshot", "--report-dir", str(tmp_path / "reports")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
    try:
        assert proc.stdout is not None
        assert b'"phase"' in proc.stdout.readline()
        proc.stdout.close()  # `| head -1` has what it wanted
        with log.open("a") as fh:  # the next event meets the closed pipe
            fh.write("[ACTOR] init_model DONE\n")
        assert proc.wait(timeout=20) == 141
        assert proc.stderr is not None and proc.stderr.read() == b""
    finally:
        proc.kill()
        proc.wait()


def test_run_with_a_closed_stdout_keeps_the_jobs_status_and_its_log(tmp_path: Path):
    job = "import sys\nfor i in range(20000): print('line', i)\nsys.exit(5)\n"
    done = to_closed_pipe("run", "--log", str(tmp_path / "job.log"), "--", sys.executable,
                          "-c", job)
    assert (done.returncode, done.stderr) == (5, "")
    assert (tmp_path / "job.log").read_text().count("\n") == 20000
