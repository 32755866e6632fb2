"""GPUs through a fake NVML module loaded in the probe child, as the real one would be."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from hangwatch.collectors.gpu import NVML_MODULE_ENV, collect_gpus

FAKE = str(Path(__file__).resolve().parents[1] / "fakes" / "fake_nvml.py")
GIB = 2**30


@pytest.fixture
def fake_nvml(monkeypatch):
    def use(scenario: dict) -> None:
        monkeypatch.setenv(NVML_MODULE_ENV, FAKE)
        monkeypatch.setenv("FAKE_NVML", json.dumps(scenario))
    return use


def test_several_gpus_are_read_with_two_utilization_samples(fake_nvml):
    fake_nvml({"mode": "ok", "gpus": [
        {"name": "NVIDIA H100 80GB HBM3", "util": [100, 98], "mem": [70 * GIB, 80 * GIB],
         "temp": 65, "power_mw": 312500, "procs": [[4242, 60 * GIB], [4243, 1 * GIB]]},
        {"name": "NVIDIA H100 80GB HBM3", "util": [0, 4], "mem": [1 * GIB, 80 * GIB],
         "temp": 40, "power_mw": 70000, "procs": [], "unsupported": ["power", "temp"]},
    ]})
    result = collect_gpus(10, interval=0.05)
    assert result["status"] == "ok"
    first, second = result["gpus"]
    assert first["name"] == "NVIDIA H100 80GB HBM3"  # bytes from old bindings decoded
    assert first["uuid"] == "GPU-fake-0"
    assert first["utilization_samples"] == [100, 98]
    assert first["utilization"] == 99
    assert (first["memory_used"], first["memory_total"]) == (70 * GIB, 80 * GIB)
    assert (first["temperature"], first["power_w"]) == (65, 312.5)
    assert first["processes"] == [{"pid": 4242, "used_memory": 60 * GIB},
                                  {"pid": 4243, "used_memory": 1 * GIB}]
    # An unsupported call reads as None; it does not lose the rest of the device.
    assert (second["power_w"], second["temperature"]) == (None, None)
    assert second["utilization_samples"] == [0, 4]


def test_missing_nvml_library_is_a_clear_note(fake_nvml):
    fake_nvml({"mode": "missing", "gpus": []})
    result = collect_gpus(10)
    assert result["status"] == "missing"
    assert "NVML Shared Library Not Found" in result["detail"]
    assert result["gpus"] == []


def test_bindings_that_cannot_be_imported_read_as_missing_with_the_fix():
    result = collect_gpus(10, module="hangwatch_no_such_nvml_module")
    assert result["status"] == "missing"
    assert "pip install nvidia-ml-py" in result["detail"]


def test_nvml_that_never_answers_is_a_timeout_within_its_bound(fake_nvml):
    fake_nvml({"mode": "hang", "gpus": []})
    started = time.monotonic()
    result = collect_gpus(1.0)
    elapsed = time.monotonic() - started
    assert result["status"] == "timeout"
    assert "wedged" in result["detail"]
    assert elapsed < 2.5


def test_lost_gpu_is_an_error_naming_it(fake_nvml):
    fake_nvml({"mode": "lost", "gpus": [{"name": "x"}]})
    result = collect_gpus(10)
    assert result["status"] == "error"
    assert "GpuIsLost" in result["detail"]


def test_probe_that_dies_is_an_error_not_a_crash(tmp_path):
    broken = tmp_path / "broken_nvml.py"
    broken.write_text("import os\nos._exit(7)\n")
    result = collect_gpus(10, module=str(broken))
    assert result["status"] == "error"
    assert "exit 7" in result["detail"]
