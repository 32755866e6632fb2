"""ulimits, the clock and free disk, each read through what the machine is given."""

from __future__ import annotations

import os
import resource

from hangwatch.collectors.bounded import CommandResult
from hangwatch.doctor import clock, disk, limits
from hangwatch.doctor.clock import parse_chrony
from tests.fakes.doctor import by_id, context

INF = resource.RLIM_INFINITY
CHRONY = """Reference ID    : A9FEA97B (169.254.169.123)
Stratum         : 4
System time     : 0.000012345 seconds slow of NTP time
Leap status     : Normal
"""


def rlimits(memlock: tuple[int, int], nofile: tuple[int, int]):
    table = {resource.RLIMIT_MEMLOCK: memlock, resource.RLIMIT_NOFILE: nofile}
    return lambda which: table[which]


def test_small_memlock_with_infiniband_fails(tmp_path):
    (tmp_path / "class" / "infiniband" / "mlx5_0").mkdir(parents=True)
    checks, _ = limits.run(context(sysfs=tmp_path, getrlimit=rlimits((65536, 65536),
                                                                     (INF, INF))))
    memlock = by_id(checks, "limits.memlock")
    assert memlock.status == "fail"
    assert "memlock 65536 (hard 65536) with RDMA devices mlx5_0" in memlock.detail
    assert "ulimit -l unlimited" in memlock.fix
    assert by_id(checks, "limits.nofile").status == "ok"


def test_small_memlock_without_rdma_and_low_nofile(tmp_path):
    checks, _ = limits.run(context(sysfs=tmp_path, getrlimit=rlimits((65536, INF),
                                                                     (1024, 1048576))))
    assert by_id(checks, "limits.memlock").status == "ok"
    nofile = by_id(checks, "limits.nofile")
    assert nofile.status == "warn" and nofile.fix == "`ulimit -n 65536` before launching"


def test_chrony_tracking_is_parsed():
    assert parse_chrony(CHRONY) == {"source": "chronyc", "synchronized": True,
                                    "offset_s": -0.000012345}
    unsynced = CHRONY.replace("Normal", "Not synchronised")
    assert parse_chrony(unsynced)["synchronized"] is False


def test_clock_synchronised_by_chrony_passes_with_its_offset():
    def run(argv, timeout):
        assert argv[1:] == ["-n", "tracking"]
        return CommandResult(0, CHRONY, "")

    checks, facts = clock.run(context(which=lambda name: f"/usr/bin/{name}"
                                      if name == "chronyc" else None, run=run,
                                      timex=lambda: None))
    assert by_id(checks, "clock.sync").status == "ok"
    assert facts["clock"]["offset_s"] == -0.000012345


def test_clock_the_kernel_calls_unsynchronised_is_a_warning():
    checks, facts = clock.run(context(which=lambda name: None, timex=lambda: {
        "source": "adjtimex", "synchronized": False, "maxerror_s": 16.0}))
    check = by_id(checks, "clock.sync")
    assert check.status == "warn"
    assert check.detail == "adjtimex: not synchronised, error bound 16s"
    assert facts["clock"]["synchronized"] is False


def test_clock_with_nothing_to_ask_is_skipped():
    checks, _ = clock.run(context(which=lambda name: None, timex=lambda: None))
    assert by_id(checks, "clock.sync").status == "skip"


def test_nearly_full_disk_fails(tmp_path):
    def statvfs(path: str) -> os.statvfs_result:
        return os.statvfs_result((4096, 4096, 10_000_000, 100_000, 100_000, 0, 0, 0, 0, 255))

    checks, facts = disk.run(context(statvfs=statvfs, options={"disk": (tmp_path,)}))
    check = by_id(checks, "disk.free")
    assert check.status == "fail" and "0.4 GiB free (99% used)" in check.detail
    assert facts["disk_free"] == {str(tmp_path): 100_000 * 4096}


def test_folders_on_one_filesystem_are_one_line(tmp_path):
    (tmp_path / "ckpt").mkdir()
    checks, _ = disk.run(context(options={"disk": (tmp_path, tmp_path / "ckpt",
                                                   tmp_path / "reports-not-yet")}))
    assert [c.detail.split(":")[0] for c in checks] == [str(tmp_path)]
