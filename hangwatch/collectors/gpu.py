"""GPUs through NVML: the only module that imports the NVML bindings.

On a wedged GPU the driver stops answering and any NVML call (like `nvidia-smi` itself) can
block forever, so the parent never calls NVML: `collect_gpus` runs `read_nvml` in a child
process (`nvml_probe`) and kills it after a timeout. A timeout is itself a finding.

The module the child imports is `pynvml` unless HANGWATCH_NVML_MODULE names another module or a
`.py` file (tests use a fake).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from hangwatch.collectors.bounded import run_command

NVML_MODULE_ENV = "HANGWATCH_NVML_MODULE"
DEFAULT_MODULE = "pynvml"
# NVML errors meaning "no NVIDIA driver or library here", as opposed to a driver in trouble.
_MISSING_ERRORS = {"NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded",
                   "NVMLError_FunctionNotFound"}
_NOT_AVAILABLE = 2**64 - 1  # NVML_VALUE_NOT_AVAILABLE for an unsigned long long
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def collect_gpus(timeout: float = 10.0, *, module: str | None = None,
                 interval: float = 1.0) -> dict[str, Any]:
    """{"status": ok|timeout|missing|error, "detail": str, "gpus": [...], "elapsed_s": float}."""
    module = module or os.environ.get(NVML_MODULE_ENV) or DEFAULT_MODULE
    env = dict(os.environ)
    # The child must import hangwatch even when it is run from a checkout, not installed.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
    argv = [sys.executable, "-m", "hangwatch.collectors.nvml_probe", "--module", module,
            "--interval", str(interval)]
    started = time.monotonic()
    result = run_command(argv, timeout, env)
    elapsed = round(time.monotonic() - started, 2)
    if result.timed_out:
        return _status("timeout", f"NVML did not answer within {timeout:g}s: the GPU driver "
                                  "may be wedged (nvidia-smi would hang too)", elapsed)
    if result.start_error is not None:
        return _status("error", f"could not start the NVML probe: {result.start_error}", elapsed)
    try:
        data = json.loads(result.stdout)
        if not isinstance(data, dict) or "status" not in data:
            raise ValueError("no status")
    except ValueError:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        return _status("error", f"NVML probe failed (exit {result.returncode}): "
                                f"{' | '.join(tail) or 'no output'}", elapsed)
    data["elapsed_s"] = elapsed
    return data


def _status(status: str, detail: str, elapsed: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"status": status, "detail": detail, "gpus": []}
    if elapsed is not None:
        out["elapsed_s"] = elapsed
    return out


def load_module(name: str) -> ModuleType:
    if name.endswith(".py"):
        spec = importlib.util.spec_from_file_location("hangwatch_nvml_module", name)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {name}")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    return importlib.import_module(name)


def read_nvml(module: str = DEFAULT_MODULE, interval: float = 1.0) -> dict[str, Any]:
    """Read every GPU; runs in the child process. Never raises: problems become a status."""
    try:
        nvml = load_module(module)
    except ImportError as exc:
        return _status("missing", f"NVML bindings not importable ({exc}): "
                                  "pip install nvidia-ml-py")
    try:
        nvml.nvmlInit()
    except Exception as exc:
        if type(exc).__name__ in _MISSING_ERRORS:
            return _status("missing", f"no NVIDIA driver or GPU here ({exc})")
        return _status("error", f"nvmlInit failed: {type(exc).__name__}: {exc}")
    try:
        gpus = _read_devices(nvml, interval)
        driver = _text(_field(getattr(nvml, "nvmlSystemGetDriverVersion", None)))
        return {"status": "ok", "detail": "", "driver": driver, "gpus": gpus}
    except Exception as exc:  # e.g. NVMLError_GpuIsLost: the finding is the error itself
        return _status("error", f"{type(exc).__name__}: {exc}")
    finally:
        _field(nvml.nvmlShutdown)


def _read_devices(nvml: Any, interval: float) -> list[dict[str, Any]]:
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    # Two utilization samples about `interval` apart: one sample can catch a short lull.
    first = [_utilization(nvml, h) for h in handles]
    if handles and interval > 0:
        time.sleep(interval)
    gpus = []
    for index, handle in enumerate(handles):
        samples = [u for u in (first[index], _utilization(nvml, handle)) if u is not None]
        memory = _field(nvml.nvmlDeviceGetMemoryInfo, handle)
        power = _field(nvml.nvmlDeviceGetPowerUsage, handle)
        gpus.append({
            "index": index,
            "name": _text(_field(nvml.nvmlDeviceGetName, handle)),
            "uuid": _text(_field(nvml.nvmlDeviceGetUUID, handle)),
            "utilization": round(sum(samples) / len(samples)) if samples else None,
            "utilization_samples": samples,
            "memory_used": getattr(memory, "used", None),
            "memory_total": getattr(memory, "total", None),
            "temperature": _field(nvml.nvmlDeviceGetTemperature, handle,
                                  getattr(nvml, "NVML_TEMPERATURE_GPU", 0)),
            "power_w": round(power / 1000, 1) if isinstance(power, (int, float)) else None,
            "processes": _processes(nvml, handle),
            "ecc": _ecc(nvml, handle),
        })
    return gpus


def _ecc(nvml: Any, handle: Any) -> dict[str, Any]:
    """What the GPU reports of memory errors; a call it does not support is left out."""
    uncorrected = _field(getattr(nvml, "nvmlDeviceGetTotalEccErrors", None), handle,
                         getattr(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1),
                         getattr(nvml, "NVML_VOLATILE_ECC", 0))
    pending = _field(getattr(nvml, "nvmlDeviceGetRetiredPagesPendingStatus", None), handle)
    # Row remapping replaced page retirement on A100 and later: (corrected, uncorrected,
    # pending, failure).
    rows = _field(getattr(nvml, "nvmlDeviceGetRemappedRows", None), handle)
    out = {"uncorrected_volatile": uncorrected,
           "retired_pages_pending": None if pending is None else bool(pending),
           "remap_pending": bool(rows[2]) if rows else None,
           "remap_failed": bool(rows[3]) if rows else None}
    return {k: v for k, v in out.items() if v is not None}


def _utilization(nvml: Any, handle: Any) -> int | None:
    rates = _field(nvml.nvmlDeviceGetUtilizationRates, handle)
    return getattr(rates, "gpu", None)


def _processes(nvml: Any, handle: Any) -> list[dict[str, Any]]:
    seen: dict[int, dict[str, Any]] = {}
    for getter in ("nvmlDeviceGetComputeRunningProcesses",
                   "nvmlDeviceGetGraphicsRunningProcesses"):
        fn = getattr(nvml, getter, None)
        for proc in (_field(fn, handle) if fn else None) or []:
            used = getattr(proc, "usedGpuMemory", None)
            if used == _NOT_AVAILABLE:
                used = None
            seen.setdefault(int(proc.pid), {"pid": int(proc.pid), "used_memory": used})
    return list(seen.values())


def _field(fn: Any, *args: Any) -> Any:
    """One NVML call; a call this GPU does not support (or any NVML error) reads as None."""
    try:
        return fn(*args)
    except Exception:
        return None


def _text(value: Any) -> str | None:
    return value.decode(errors="replace") if isinstance(value, bytes) else value
