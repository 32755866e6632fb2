from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hangwatch.sources.notify import DirectoryWatcher, NotWatchable, is_remote_fs, mount_fs_type

MOUNTS = """\
/dev/vda / ext4 rw,relatime 0 0
proc /proc proc rw 0 0
server:/export /mnt/data nfs4 rw,vers=4.2 0 0
/dev/vdb /mnt/database xfs rw 0 0
/dev/vdc /mnt/data/local ext4 rw 0 0
sshfs#me@host: /home/me/remote\\040dir fuse.sshfs rw 0 0
lustre@tcp:/fs /scratch ext4 rw 0 0
lustre@tcp:/fs /scratch lustre rw 0 0
"""


@pytest.mark.parametrize(
    ("path", "fs_type"),
    [
        ("/", "ext4"),
        ("/home/me/job/train.log", "ext4"),
        ("/mnt/data/run1/train.log", "nfs4"),
        ("/mnt/data", "nfs4"),
        ("/mnt/database/train.log", "xfs"),  # a prefix of the name is not a parent
        ("/mnt/data/local/train.log", "ext4"),  # the deepest mount wins
        ("/home/me/remote dir/train.log", "fuse.sshfs"),  # \040 is a space
        ("/scratch/train.log", "lustre"),  # a later mount on the same point hides the first
    ],
)
def test_mount_fs_type_finds_the_mount_holding_a_path(path: str, fs_type: str):
    assert mount_fs_type(path, MOUNTS) == fs_type


def test_mount_fs_type_without_a_matching_mount_is_none():
    assert mount_fs_type("/x", "") is None


@pytest.mark.parametrize(
    ("fs_type", "remote"),
    [
        ("nfs", True),
        ("nfs4", True),
        ("cifs", True),
        ("lustre", True),
        ("gpfs", True),
        ("fuse.sshfs", True),
        ("fuse.gcsfuse", True),
        ("fuseblk", False),
        ("ext4", False),
        ("xfs", False),
        ("tmpfs", False),
        ("overlay", False),
    ],
)
def test_remote_file_systems_are_recognized(fs_type: str, remote: bool):
    assert is_remote_fs(fs_type) is remote


@pytest.fixture
def watcher() -> Iterator[DirectoryWatcher]:
    before = set(threading.enumerate())
    w = DirectoryWatcher()
    yield w
    w.stop()
    assert set(threading.enumerate()) == before, "observer threads left running"


def test_writer_wakes_only_the_subscriber_of_that_file(tmp_path: Path, watcher):
    woke_a, woke_b = threading.Event(), threading.Event()
    assert watcher.subscribe(tmp_path / "a.log", woke_a.set)
    assert watcher.subscribe(tmp_path / "b.log", woke_b.set)
    (tmp_path / "a.log").write_bytes(b"x\n")
    assert woke_a.wait(2.0)
    assert not woke_b.wait(0.2)


def test_directory_not_yet_created_is_asked_again_later(tmp_path: Path, watcher):
    woke = threading.Event()
    log = tmp_path / "run" / "train.log"
    assert not watcher.subscribe(log, woke.set)
    log.parent.mkdir()
    assert watcher.subscribe(log, woke.set)
    log.write_bytes(b"x\n")
    assert woke.wait(2.0)


def test_subscribing_again_renews_the_watch_of_a_recreated_directory(tmp_path: Path, watcher):
    woke = threading.Event()
    log = tmp_path / "run" / "train.log"
    log.parent.mkdir()
    assert watcher.subscribe(log, woke.set)
    shutil.rmtree(log.parent)
    assert woke.wait(2.0)  # the watch saw its directory go
    woke.clear()
    log.parent.mkdir()  # ext4 may give it the old inode number: that must not matter
    assert watcher.subscribe(log, woke.set)
    log.write_bytes(b"x\n")
    assert woke.wait(2.0)


def test_unsubscribed_wake_is_not_called(tmp_path: Path, watcher):
    woke = threading.Event()
    log = tmp_path / "train.log"
    assert watcher.subscribe(log, woke.set)
    watcher.unsubscribe(log, woke.set)
    log.write_bytes(b"x\n")
    assert not woke.wait(0.2)


def test_network_file_system_is_not_watchable(tmp_path: Path):
    mounts = tmp_path / "mounts"
    mounts.write_text(f"server:/export {tmp_path} nfs rw 0 0\n")
    w = DirectoryWatcher(mounts=mounts)
    try:
        with pytest.raises(NotWatchable, match="nfs file system"):
            w.subscribe(tmp_path / "train.log", lambda: None)
    finally:
        w.stop()
