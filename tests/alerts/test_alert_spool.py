"""The on-disk spool: order, atomic files, survival across reopening, bad files, limits."""

from __future__ import annotations

import os
from pathlib import Path

from hangwatch.alerts.spool import DiskSpool, MemorySpool, open_spool, spool_root


def alert(n: int) -> dict:
    return {"event": "stall", "episode": f"ep{n}"}


def drain(spool) -> list[str]:
    got = []
    while (item := spool.oldest()) is not None:
        got.append(item[1]["episode"])
        spool.remove(item[0])
    return got


def test_alerts_come_out_oldest_first_also_after_reopening(tmp_path: Path):
    spool = DiskSpool(tmp_path / "s")
    for n in range(3):
        spool.put(alert(n))
    again = DiskSpool(tmp_path / "s")  # a new process on the same folder
    again.put(alert(3))
    assert len(again) == 4
    assert drain(again) == ["ep0", "ep1", "ep2", "ep3"]
    assert os.listdir(tmp_path / "s") == []


def test_each_alert_is_one_whole_file_and_no_temporary_is_left(tmp_path: Path):
    spool = DiskSpool(tmp_path / "s")
    spool.put(alert(1))
    [name] = os.listdir(tmp_path / "s")
    assert name == "000000000001.json"
    assert (tmp_path / "s" / name).stat().st_mode & 0o077 == 0  # 0600: alerts may hold paths


def test_a_file_that_is_not_an_alert_is_set_aside_and_the_rest_delivered(tmp_path: Path):
    warnings: list[str] = []
    spool = DiskSpool(tmp_path / "s", warn=warnings.append)
    spool.put(alert(1))
    spool.put(alert(2))
    (tmp_path / "s" / "000000000001.json").write_text("{half")
    assert drain(spool) == ["ep2"]
    assert (tmp_path / "s" / "000000000001.json.bad").exists()
    assert "set aside" in warnings[0]


def test_past_the_limit_the_oldest_alerts_are_dropped_and_returned(tmp_path: Path):
    spool = DiskSpool(tmp_path / "s", limit=2)
    assert spool.put(alert(1)) == []
    spool.put(alert(2))
    assert spool.put(alert(3)) == [alert(1)]
    assert drain(spool) == ["ep2", "ep3"]
    memory = MemorySpool(limit=1)
    memory.put(alert(1))
    assert memory.put(alert(2)) == [alert(1)]


def test_a_folder_that_cannot_be_made_falls_back_to_memory_with_a_warning(tmp_path: Path):
    (tmp_path / "file").write_text("")
    warnings: list[str] = []
    spool = open_spool(tmp_path / "file", "webhook-x", warnings.append)
    assert isinstance(spool, MemorySpool)
    assert "memory" in warnings[0]


def test_the_spool_lives_in_the_state_dir_else_the_user_cache(tmp_path: Path):
    assert spool_root(tmp_path / "state") == tmp_path / "state" / "alert-spool"
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert spool_root(None, env) == tmp_path / "cache" / "hangwatch" / "alert-spool"
    assert spool_root(None, {"HANGWATCH_CACHE_DIR": ""}) is None
