"""The machine's state, with statvfs and /proc injected for full and hung filesystems."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from hangwatch.collectors.system import collect_system, filesystem


def fake_statvfs(blocks: int, bfree: int, bavail: int):
    def statvfs(path: str) -> os.statvfs_result:
        return os.statvfs_result((4096, 4096, blocks, bfree, bavail, 0, 0, 0, 0, 255))
    return statvfs


def test_real_machine_is_described(tmp_path):
    log = tmp_path / "logs" / "train.log"  # not written yet: its nearest folder is measured
    system = collect_system([log], cpu_sample=0.05)
    assert system["memory"]["total"] > 0
    assert len(system["load"]) == 3
    assert system["shm"]["path"] == "/dev/shm" and "used_percent" in system["shm"]
    assert system["filesystems"][0]["path"] == str(log)
    assert system["filesystems"][0]["total"] > 0
    assert system["open_files"]["soft_limit"] > 0


def test_usage_is_counted_as_df_does():
    # 1000 blocks, 50 free of which 20 are for users: df says 950 / (950 + 20) = 97.9%.
    fs = filesystem(Path("/dev/shm"), fake_statvfs(1000, 50, 20), 1.0)
    assert fs["used_percent"] == 97.9
    assert (fs["used"], fs["free"], fs["total"]) == (950 * 4096, 20 * 4096, 1000 * 4096)


def test_hung_mount_is_an_error_within_its_bound(tmp_path):
    never = threading.Event()

    def hung(path: str) -> os.statvfs_result:
        never.wait()
        raise AssertionError("unreachable")

    started = time.monotonic()
    system = collect_system([tmp_path / "x.log"], statvfs=hung, fs_timeout=0.2, cpu_sample=0)
    assert time.monotonic() - started < 1.5
    assert "did not answer within 0.2s (a hung network mount?)" in system["shm"]["error"]
    assert "did not answer" in system["filesystems"][0]["error"]
    never.set()


def test_system_wide_open_files_come_from_proc(tmp_path):
    (tmp_path / "sys" / "fs").mkdir(parents=True)
    (tmp_path / "sys" / "fs" / "file-nr").write_text("3264\t0\t9223372036854775807\n")
    system = collect_system([], proc_root=tmp_path, cpu_sample=0)
    assert system["open_files"]["system_open"] == 3264
    assert system["open_files"]["system_max"] == 9223372036854775807
