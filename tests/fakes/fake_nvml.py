"""A stand-in for `pynvml`, loaded by the NVML probe through HANGWATCH_NVML_MODULE.

Its behaviour comes from the FAKE_NVML environment variable (JSON):
  {"mode": "ok", "gpus": [{"name": ..., "util": [100, 99], "mem": [used, total],
                           "temp": 65, "power_mw": 300000, "procs": [[pid, bytes]]}]}
  mode "missing": nvmlInit raises NVMLError_LibraryNotFound
  mode "hang":    nvmlInit never returns (a wedged driver)
  mode "lost":    reading a device raises NVMLError_GpuIsLost
A gpu may set "unsupported": ["power"] to make that call raise NVMLError_NotSupported, and
"ecc": {"uncorrected": N, "pending": bool, "remap": [corrected, uncorrected, pending, failed]};
without "ecc" the ECC calls are not supported.
"""

from __future__ import annotations

import json
import os
import time
from types import SimpleNamespace

NVML_TEMPERATURE_GPU = 0


class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_GpuIsLost(NVMLError):
    pass


_SCENARIO = json.loads(os.environ.get("FAKE_NVML", '{"mode": "ok", "gpus": []}'))
_calls = {"util": 0}


def nvmlInit():
    mode = _SCENARIO.get("mode", "ok")
    if mode == "missing":
        raise NVMLError_LibraryNotFound("NVML Shared Library Not Found")
    if mode == "hang":
        while True:
            time.sleep(3600)


def nvmlShutdown():
    pass


def nvmlSystemGetDriverVersion():
    return "550.54.15"


def nvmlDeviceGetCount():
    return len(_SCENARIO["gpus"])


def nvmlDeviceGetHandleByIndex(index):
    if _SCENARIO.get("mode") == "lost":
        raise NVMLError_GpuIsLost("GPU is lost")
    return index


def _gpu(handle, what):
    gpu = _SCENARIO["gpus"][handle]
    if what in gpu.get("unsupported", ()):
        raise NVMLError_NotSupported("Not Supported")
    return gpu


def nvmlDeviceGetName(handle):
    return _gpu(handle, "name")["name"].encode()  # old bindings return bytes


def nvmlDeviceGetUUID(handle):
    return f"GPU-fake-{handle}"


def nvmlDeviceGetUtilizationRates(handle):
    samples = _gpu(handle, "util")["util"]
    # Each device is asked twice: the first time gets the first sample.
    nth = _calls.setdefault(handle, 0)
    _calls[handle] = nth + 1
    return SimpleNamespace(gpu=samples[min(nth, len(samples) - 1)], memory=0)


def nvmlDeviceGetMemoryInfo(handle):
    used, total = _gpu(handle, "mem")["mem"]
    return SimpleNamespace(used=used, total=total, free=total - used)


def nvmlDeviceGetTemperature(handle, sensor):
    return _gpu(handle, "temp")["temp"]


def nvmlDeviceGetPowerUsage(handle):
    return _gpu(handle, "power")["power_mw"]


def nvmlDeviceGetComputeRunningProcesses(handle):
    return [SimpleNamespace(pid=pid, usedGpuMemory=used)
            for pid, used in _gpu(handle, "procs").get("procs", [])]


def _ecc(handle, what):
    ecc = _SCENARIO["gpus"][handle].get("ecc", {})
    if what not in ecc:
        raise NVMLError_NotSupported("Not Supported")
    return ecc[what]


def nvmlDeviceGetTotalEccErrors(handle, error_type, counter_type):
    return _ecc(handle, "uncorrected")


def nvmlDeviceGetRetiredPagesPendingStatus(handle):
    return int(_ecc(handle, "pending"))


def nvmlDeviceGetRemappedRows(handle):
    return tuple(_ecc(handle, "remap"))
