"""Versions of what the job runs on, as facts for comparing nodes: a node with another torch
or NCCL is a classic cause of a hang in the first collective.

They are read by the job's Python in child processes: importing torch (for its CUDA and NCCL
versions) takes seconds and may hang on a broken driver, so it has a bound of its own.
"""

from __future__ import annotations

import json
from typing import Any

from hangwatch.doctor.model import Check, Context, Outcome

DISTRIBUTIONS = ("torch", "ray", "vllm", "jax", "jaxlib", "datasets", "nvidia-nccl-cu12",
                 "nvidia-nccl-cu13")
METADATA_S = 5.0
TORCH_S = 10.0

METADATA_SCRIPT = f"""
import json, platform
from importlib import metadata
out = {{"python": platform.python_version()}}
for name in {DISTRIBUTIONS!r}:
    try:
        out[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        pass
print(json.dumps(out))
"""

TORCH_SCRIPT = """
import json, torch
out = {"cuda": torch.version.cuda}
try:
    nccl = torch.cuda.nccl.version()
    out["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
except Exception:
    pass
print(json.dumps(out))
"""


def run(ctx: Context) -> Outcome:
    versions, error = _child(ctx, METADATA_SCRIPT, METADATA_S)
    if versions is None:
        return [Check("versions", "warn", f"cannot read package versions with "
                      f"{ctx.machine.python}: {error}")], {"versions": {}}
    notes = []
    if "torch" in versions:
        torch, error = _child(ctx, TORCH_SCRIPT, TORCH_S)
        if torch is None:
            notes.append(f"torch's CUDA and NCCL versions unknown: {error}")
        else:
            versions.update({k: v for k, v in torch.items() if v})
    summary = ", ".join(f"{k} {v}" for k, v in versions.items())
    if notes:
        return [Check("versions", "warn", f"{summary}; {'; '.join(notes)}",
                      "run `python -c 'import torch'` to see what fails")], {"versions": versions}
    return [Check("versions", "ok", summary)], {"versions": versions}


def _child(ctx: Context, script: str, wanted: float) -> tuple[dict[str, Any] | None, str]:
    timeout = ctx.bound(wanted)
    result = ctx.machine.run([ctx.machine.python, "-c", script], timeout)
    if result.timed_out:
        return None, f"took over {timeout:g}s"
    if result.returncode != 0:
        tail = (result.stderr or result.start_error or "").strip().splitlines()
        return None, tail[-1] if tail else f"exit {result.returncode}"
    try:
        value = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None, "no answer"
    return (value, "") if isinstance(value, dict) else (None, "no answer")
