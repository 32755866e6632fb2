"""--data files on disk, and Hugging Face datasets locks held by a real process."""

from __future__ import annotations

import os
import signal
import socket
import sys

import pytest

from hangwatch.doctor import data
from tests.fakes.doctor import by_id, context

HOLD_LOCK = """
import fcntl, sys, time
f = open(sys.argv[1], "w")
fcntl.flock(f, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(60)
"""


# datasets' lock where the file system has no flock: filelock's existence lock (a marker file
# naming its owner), taken by a real process that then waits or is killed holding it.
SOFT_LOCK = """
import sys, time
from filelock import SoftFileLock
lock = SoftFileLock(sys.argv[1])
lock.acquire()
print("locked", flush=True)
time.sleep(60)
"""


def files_check(paths, **machine):
    return by_id(data.run(context(options={"data": tuple(paths)}, **machine))[0], "data.files")


def test_missing_data_file_fails_naming_it(tmp_path):
    good = tmp_path / "train.jsonl"
    good.write_text('{"text": "a"}\n{"text": "b"}\n')
    missing = tmp_path / "val.jsonl"
    check = files_check([good, missing])
    assert check.status == "fail"
    assert check.detail == f"{missing}: no such file or folder"


def test_good_files_and_folders_pass(tmp_path):
    (tmp_path / "shards").mkdir()
    (tmp_path / "shards" / "0.bin").write_bytes(b"x")
    parquet = tmp_path / "t.parquet"
    parquet.write_bytes(b"PAR1" + b"\0" * 100 + b"PAR1")
    as_json = tmp_path / "meta.json"
    as_json.write_text('  {"a": 1}')
    check = files_check([tmp_path / "shards", parquet, as_json])
    assert (check.status, check.detail) == ("ok", "3 path(s) present and readable")


def test_empty_truncated_and_malformed_files_fail(tmp_path):
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    truncated = tmp_path / "t.parquet"
    truncated.write_bytes(b"PAR1" + b"\0" * 100)
    half_line = tmp_path / "t.jsonl"
    half_line.write_text('{"text": "a"}\n{"text": "b')
    not_json = tmp_path / "x.json"
    not_json.write_text("hello")
    (tmp_path / "empty_dir").mkdir()
    detail = files_check([empty, truncated, half_line, not_json, tmp_path / "empty_dir"]).detail
    assert f"{empty}: empty file" in detail
    assert f"{truncated}: parquet file without its footer" in detail
    assert f"{half_line}: last line is not JSON" in detail
    assert f"{not_json}: does not start like JSON" in detail
    assert f"{tmp_path / 'empty_dir'}: empty folder" in detail


def test_no_data_given_is_skipped():
    assert files_check([]).status == "skip"


def test_datasets_lock_held_by_a_process_names_it(tmp_path, jobs):
    cache = tmp_path / "hf" / "datasets" / "parquet" / "default"
    cache.mkdir(parents=True)
    lock = cache / "_builder.lock"
    idle = cache.parent / "other.lock"
    idle.write_text("")
    holder = jobs.start([sys.executable, "-c", HOLD_LOCK, str(lock)], stdout=-1)
    assert holder.stdout.readline().strip() == "locked"
    check = by_id(data.run(context({"HF_HOME": str(tmp_path / "hf")}))[0], "data.hf_locks")
    assert check.status == "warn"
    assert f"_builder.lock held by pid {holder.pid} (" in check.detail
    assert "1 datasets lock(s) held" in check.detail


def test_datasets_locks_nobody_holds_pass(tmp_path):
    cache = tmp_path / "datasets"
    cache.mkdir()
    (cache / "a.lock").write_text("")
    check = by_id(data.run(context({"HF_DATASETS_CACHE": str(cache)}))[0], "data.hf_locks")
    assert (check.status, check.detail) == ("ok", f"1 lock file(s) in {cache}, none held")


def locks_checks(cache):
    return [c for c in data.run(context({"HF_DATASETS_CACHE": str(cache)}))[0]
            if c.id.startswith("data.hf_")]


def soft_lock(jobs, path):
    pytest.importorskip("filelock")
    proc = jobs.start([sys.executable, "-c", SOFT_LOCK, str(path)], stdout=-1)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_lock_left_by_a_killed_process_is_stale_with_the_command_to_remove_it(tmp_path, jobs):
    cache = tmp_path / "datasets"
    cache.mkdir()
    gone = cache / "_home_u_.cache_huggingface_datasets_json_default_builder.lock"
    owner = soft_lock(jobs, gone)
    os.killpg(owner.pid, signal.SIGKILL)
    owner.wait(timeout=10)
    assert gone.exists()  # the marker outlives its owner
    held_file = cache / "parquet.lock"
    holder = soft_lock(jobs, held_file)
    held, stale = locks_checks(cache)
    assert held.status == "warn"
    assert held.detail.startswith("1 datasets lock(s) held: parquet.lock held by "
                                  f"pid {holder.pid} (")
    assert gone.name not in held.detail
    assert (stale.id, stale.status) == ("data.hf_stale_locks", "warn")
    assert stale.detail.startswith(f"1 stale datasets lock(s): {gone} (left by pid "
                                   f"{owner.pid}, which is gone)")
    assert stale.fix.endswith(f"rm -- {gone}")
    assert "parquet.lock" not in stale.detail + stale.fix


def test_lock_marker_of_another_host_counts_as_held_not_stale(tmp_path):
    cache = tmp_path / "datasets"
    cache.mkdir()
    (cache / "a.lock").write_text(f"999999\nnot-{socket.gethostname()}\n")
    (cache / "b.lock").write_text("filelock/2\npid=1\nhost=node-7\nmode=exclusive\n")
    [held] = locks_checks(cache)
    assert held.status == "warn"
    assert f"pid 999999 on host not-{socket.gethostname()} (not checked from here)" in held.detail
    assert "pid 1 on host node-7" in held.detail


def test_flock_file_left_by_a_killed_process_is_harmless(tmp_path, jobs):
    cache = tmp_path / "datasets"
    cache.mkdir()
    lock = cache / "_builder.lock"
    holder = jobs.start([sys.executable, "-c", HOLD_LOCK, str(lock)], stdout=-1)
    assert holder.stdout.readline().strip() == "locked"
    os.killpg(holder.pid, signal.SIGKILL)
    holder.wait(timeout=10)
    [check] = locks_checks(cache)
    assert (check.status, check.detail) == ("ok", f"1 lock file(s) in {cache}, none held")
