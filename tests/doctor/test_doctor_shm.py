"""/dev/shm's size from a fake mount table, and stale NCCL segments in a temp folder with a
fake /proc."""

from __future__ import annotations

from pathlib import Path

from hangwatch.doctor import shm
from tests.fakes.doctor import by_id, context
from tests.fakes.proc_tree import add_process


def machine(tmp_path: Path, options: str) -> dict:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    shm_dir = tmp_path / "shm"
    shm_dir.mkdir()
    (proc / "self" / "mounts").write_text(
        "overlay / overlay rw,relatime 0 0\n"
        f"shm {shm_dir} tmpfs {options} 0 0\n")
    return {"proc": proc, "shm": shm_dir}


def test_docker_default_shm_fails_with_the_fix(tmp_path):
    checks, facts = shm.run(context(**machine(
        tmp_path, "rw,nosuid,nodev,noexec,relatime,size=65536k")))
    size = by_id(checks, "shm.size")
    assert size.status == "fail"
    assert "is 64 MiB (mount option size=65536k)" in size.detail
    assert "--shm-size" in size.fix
    assert facts["shm"]["size"] == 64 * 2**20


def test_large_shm_passes(tmp_path):
    checks, _ = shm.run(context(**machine(tmp_path, "rw,size=16g,mode=1777")))
    assert by_id(checks, "shm.size").status == "ok"
    assert by_id(checks, "shm.stale_segments").detail.startswith("no nccl-* segments")


def test_shm_of_half_a_gigabyte_is_a_warning(tmp_path):
    checks, _ = shm.run(context(**machine(tmp_path, "rw,size=512m")))
    assert by_id(checks, "shm.size").status == "warn"


def test_nccl_segments_nobody_holds_are_stale(tmp_path):
    m = machine(tmp_path, "rw,size=16g")
    (m["shm"] / "nccl-AbC123").write_bytes(b"\0" * 4096)
    (m["shm"] / "other").write_bytes(b"x")
    add_process(m["proc"], 4242, comm="python", cmdline="python other.py")
    check = by_id(shm.run(context(**m))[0], "shm.stale_segments")
    assert check.status == "warn"
    assert "1 nccl-* segments" in check.detail and "no process holds" in check.detail
    assert check.fix == f"remove them: rm {m['shm'] / 'nccl-AbC123'}"


def test_nccl_segments_mapped_by_a_live_process_are_in_use(tmp_path):
    m = machine(tmp_path, "rw,size=16g")
    segment = m["shm"] / "nccl-AbC123"
    segment.write_bytes(b"\0" * 4096)
    add_process(m["proc"], 4242, comm="python", cmdline="python train.py")
    (m["proc"] / "4242" / "maps").write_text(
        f"7f0000000000-7f0000001000 rw-s 00000000 00:1a 123  {segment} (deleted)\n")
    check = by_id(shm.run(context(**m))[0], "shm.stale_segments")
    assert check.status == "warn"
    assert "in use by pid 4242 (python train.py)" in check.detail


def test_missing_shm_folder_fails(tmp_path):
    checks, _ = shm.run(context(shm=tmp_path / "none", proc=tmp_path))
    assert by_id(checks, "shm.size").status == "fail"
