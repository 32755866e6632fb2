"""Report files are written where another user may have been first, and on disks that fail:
never through a planted link, private, and a failure leaves the watcher running."""

from __future__ import annotations

import os
import resource
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hangwatch.core.events import StallEvent
from hangwatch.reporters.incident import write_incident
from hangwatch.sources.feed import Block
from hangwatch.storage.files import UnsafeFolder, open_report_dir, write_private
from tests.session.test_session import session

STALL = StallEvent("weight_sync", "Weight sync", None, 70.0, 60.0, wall=0.0)
FOLDER = "19700101T000000Z-weight_sync"


def write(report_dir: Path) -> Path:
    return write_incident(report_dir, stall=STALL, timeline=[], log_tail=["step 1"],
                          sources=["train.log"], snapshot=None, advice=())


def test_a_link_planted_at_the_incident_folder_is_not_followed(tmp_path: Path):
    reports, elsewhere = tmp_path / "reports", tmp_path / "attacker"
    reports.mkdir()
    elsewhere.mkdir()
    (reports / FOLDER).symlink_to(elsewhere)
    folder = write(reports)
    assert folder == reports / f"{FOLDER}-2"
    assert not folder.is_symlink() and (folder / "report.json").is_file()
    assert list(elsewhere.iterdir()) == []


def test_a_report_folder_that_is_a_link_is_refused(tmp_path: Path):
    elsewhere = tmp_path / "attacker"
    elsewhere.mkdir()
    (tmp_path / "reports").symlink_to(elsewhere)
    with pytest.raises(UnsafeFolder, match="symbolic link"):
        write(tmp_path / "reports")
    assert list(elsewhere.iterdir()) == []


def test_a_link_planted_at_a_file_name_is_replaced_not_written_through(tmp_path: Path):
    target = tmp_path / "victim"
    target.write_text("precious")
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "report.json").symlink_to(target)
    with open_report_dir(folder) as fd:
        write_private(fd, "report.json", b"{}")
    assert target.read_text() == "precious"
    assert not (folder / "report.json").is_symlink()
    assert (folder / "report.json").read_bytes() == b"{}"


def test_incident_folder_is_0700_and_files_0600_whatever_the_umask(tmp_path: Path):
    old = os.umask(0)
    try:
        folder = write(tmp_path / "reports")
    finally:
        os.umask(old)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "reports").stat().st_mode) == 0o700
    for name in ("report.json", "report.md", "stacks.txt", "log-tail.txt"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no temporary left


def test_report_path_that_is_a_file_leaves_the_watcher_running_with_a_notice(tmp_path: Path):
    (tmp_path / "reports").write_text("not a folder")
    s, rec = session(tmp_path)
    s.queue.put(Block("train.log", b"[SYNC] Starting weight synchronization\n"))
    assert s.run() == 3  # the stall is still reported, with its advice
    [incident] = rec.incidents
    assert incident.report is None and incident.advice
    [notice] = [n for n in rec.notices if n.kind == "unwritable"]
    assert "cannot write the incident report" in notice.message
    assert "not a folder" in notice.message and "watching goes on" in notice.message


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))


def test_a_disk_that_refuses_writes_leaves_the_watcher_running(tmp_path: Path):
    """RLIMIT_FSIZE makes every report write fail as a full disk would; the watch goes on and
    sees the job resume."""
    log = tmp_path / "train.log"
    log.write_text("[SYNC] Starting weight synchronization\n" + "x" * 4096 + "\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "hangwatch", str(log), "--plain", "--stall", "1s",
         "--no-snapshot", "--report-dir", str(tmp_path / "reports")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=_limit_file_size)
    try:
        assert proc.stdout is not None
        lines = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if "cannot write the incident report" in line:
                break
        assert "File too large" in lines[-1] and "watching goes on" in lines[-1]
        with log.open("a") as fh:
            fh.write("[SYNC] Finished weight synchronization\n")
        while time.monotonic() < deadline and "recovered" not in line:
            line = proc.stdout.readline()
        assert "recovered" in line
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
