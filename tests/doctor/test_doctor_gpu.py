"""GPUs through the fake NVML loaded in the probe child, as snapshots read them."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from hangwatch.collectors.gpu import NVML_MODULE_ENV
from hangwatch.doctor import gpu
from tests.fakes.doctor import by_id, context
from tests.fakes.proc_tree import add_process

FAKE = str(Path(__file__).resolve().parents[1] / "fakes" / "fake_nvml.py")
GIB = 2**30


def h100(**extra) -> dict:
    return {"name": "NVIDIA H100", "util": [0], "mem": [1 * GIB, 80 * GIB], "temp": 40,
            "power_mw": 70000, "procs": [], **extra}


@pytest.fixture
def fake_nvml(monkeypatch):
    def use(scenario: dict) -> dict[str, str]:
        monkeypatch.setenv("FAKE_NVML", json.dumps(scenario))  # read by the probe child
        return {NVML_MODULE_ENV: FAKE}
    return use


def test_healthy_gpus_are_counted_as_facts(fake_nvml):
    env = fake_nvml({"mode": "ok", "gpus": [h100(), h100()]})
    checks, facts = gpu.run(context({**env, "LOCAL_WORLD_SIZE": "2"}))
    assert {c.id: c.status for c in checks} == {"gpu.nvml": "ok", "gpu.count": "ok",
                                                "gpu.leftover_processes": "ok",
                                                "gpu.ecc": "skip"}
    assert facts["gpus"] == {"count": 2, "names": ["NVIDIA H100"], "driver": "550.54.15"}


def test_wedged_nvml_is_a_fail_within_the_bound(fake_nvml):
    env = fake_nvml({"mode": "hang", "gpus": []})
    started = time.monotonic()
    checks, _ = gpu.run(context(env, timeout=2.5))
    assert time.monotonic() - started < 3.0
    check = by_id(checks, "gpu.nvml")
    assert check.status == "fail"
    assert "wedged" in check.detail and "dmesg" in check.fix


def test_more_ranks_per_node_than_gpus_fails(fake_nvml):
    env = fake_nvml({"mode": "ok", "gpus": [h100()]})
    check = by_id(gpu.run(context({**env, "PET_NPROC_PER_NODE": "8"}))[0], "gpu.count")
    assert check.status == "fail" and "8 processes per node but 1 GPU(s)" in check.detail


def test_visible_devices_beyond_the_gpus_fail(fake_nvml):
    env = fake_nvml({"mode": "ok", "gpus": [h100()]})
    check = by_id(gpu.run(context({**env, "CUDA_VISIBLE_DEVICES": "0,1"}))[0], "gpu.count")
    assert check.status == "fail" and "lists 2 devices; this node has 1" in check.detail


def test_leftover_process_holding_most_of_a_gpu_fails_naming_it(fake_nvml, tmp_path):
    add_process(tmp_path, 4242, comm="python", cmdline="python old_run.py")
    env = fake_nvml({"mode": "ok", "gpus": [h100(mem=[70 * GIB, 80 * GIB],
                                                 procs=[[4242, 60 * GIB]])]})
    check = by_id(gpu.run(context(env, proc=tmp_path))[0], "gpu.leftover_processes")
    assert check.status == "fail"
    assert "pid 4242 (python old_run.py) 60.0 GiB" in check.detail
    assert "kill 4242" in check.fix


def test_small_leftover_is_a_warning(fake_nvml, tmp_path):
    env = fake_nvml({"mode": "ok", "gpus": [h100(procs=[[777, 1 * GIB]])]})
    check = by_id(gpu.run(context(env, proc=tmp_path))[0], "gpu.leftover_processes")
    assert check.status == "warn" and "pid 777 (exited) 1.0 GiB" in check.detail


def test_uncorrected_ecc_and_pending_retirement_fail(fake_nvml):
    env = fake_nvml({"mode": "ok", "gpus": [
        h100(ecc={"uncorrected": 0, "pending": False, "remap": [0, 0, 0, 0]}),
        h100(ecc={"uncorrected": 3, "pending": True}),
    ]})
    check = by_id(gpu.run(context(env))[0], "gpu.ecc")
    assert check.status == "fail"
    assert check.detail == ("GPU 1: 3 uncorrected ECC errors since the driver loaded; "
                            "GPU 1: memory pages wait to be retired")


def test_no_nvml_is_skipped(fake_nvml):
    env = fake_nvml({"mode": "missing", "gpus": []})
    checks, facts = gpu.run(context(env))
    assert [(c.id, c.status) for c in checks] == [("gpu.nvml", "skip")]
    assert facts == {}
