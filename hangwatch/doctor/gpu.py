"""GPUs, read through NVML in a child process that is killed when the driver does not answer
(the snapshot's collector): how many, which processes still hold memory from an earlier run,
and memory errors the driver reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hangwatch.collectors.gpu import NVML_MODULE_ENV, collect_gpus
from hangwatch.doctor.holders import describe_pid
from hangwatch.doctor.model import Check, Context, Outcome
from hangwatch.doctor.rendezvous import whole

NVML_S = 8.0
HOGGED = 0.5  # others hold this share of a GPU's memory: the next job will not fit
GIB = 2**30
WEDGED_FIX = ("look for Xid errors in `dmesg`; a GPU that does not answer needs a reset "
              "(`nvidia-smi -r -i N`, with nothing running on it) or a reboot of the node; do "
              "not start the job on this node until then")


def run(ctx: Context) -> Outcome:
    result = collect_gpus(ctx.bound(NVML_S), module=ctx.env.get(NVML_MODULE_ENV), interval=0)
    status = result["status"]
    if status == "missing":
        return [Check("gpu.nvml", "skip", f"no GPUs to check: {result['detail']}")], {}
    if status != "ok":
        return [Check("gpu.nvml", "fail", result["detail"], WEDGED_FIX)], {}
    gpus: list[dict[str, Any]] = result["gpus"]
    names = sorted({g.get("name") or "?" for g in gpus})
    facts = {"gpus": {"count": len(gpus), "names": names, "driver": result.get("driver")}}
    nvml = Check("gpu.nvml", "ok", f"{len(gpus)} x {', '.join(names) or 'no GPU'} (driver "
                 f"{result.get('driver') or '?'}), NVML answered in {result['elapsed_s']}s")
    return [nvml, _count(ctx.env, len(gpus)), _leftovers(ctx, gpus), _ecc(gpus)], facts


def _count(env: Mapping[str, str], count: int) -> Check:
    if count == 0:
        return Check("gpu.count", "fail", "NVML answers but sees no GPU",
                     "check the container's GPU request (`--gpus all`, nvidia.com/gpu)")
    usable = count
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        listed = [d for d in visible.split(",") if d.strip()]
        if len(listed) > count:
            return Check("gpu.count", "fail", f"CUDA_VISIBLE_DEVICES={visible} lists "
                         f"{len(listed)} devices; this node has {count}",
                         "list only devices that exist on this node")
        usable = len(listed)
    per_node = next((whole(env, k) for k in ("LOCAL_WORLD_SIZE", "PET_NPROC_PER_NODE")
                     if whole(env, k) is not None), None)
    if per_node is not None and per_node > usable:
        return Check("gpu.count", "fail", f"{per_node} processes per node but {usable} GPU(s) "
                     "usable: ranks would share a GPU, which NCCL refuses or hangs on",
                     "launch one process per GPU (--nproc-per-node)")
    return Check("gpu.count", "ok", f"{usable} GPU(s) usable"
                 + (f" for {per_node} process(es) per node" if per_node else ""))


def _leftovers(ctx: Context, gpus: list[dict[str, Any]]) -> Check:
    holders: dict[int, int] = {}
    hogged = []
    for gpu in gpus:
        used = 0
        for proc in gpu.get("processes") or []:
            memory = proc.get("used_memory") or 0
            holders[proc["pid"]] = holders.get(proc["pid"], 0) + memory
            used += memory
        if gpu.get("memory_total") and used > HOGGED * gpu["memory_total"]:
            hogged.append(str(gpu["index"]))
    if not holders:
        return Check("gpu.leftover_processes", "ok", "no process holds GPU memory")
    who = ", ".join(f"{describe_pid(ctx.machine.proc, pid)} {mem / GIB:.1f} GiB"
                    for pid, mem in sorted(holders.items()))
    fix = (f"if they are left from an earlier run, end them (kill {' '.join(map(str, holders))})"
           "; a pid not visible here belongs to another container")
    if hogged:
        return Check("gpu.leftover_processes", "fail", f"GPU {', '.join(hogged)} more than "
                     f"half taken before the job starts: {who}", fix)
    return Check("gpu.leftover_processes", "warn", f"processes hold GPU memory: {who}", fix)


def _ecc(gpus: list[dict[str, Any]]) -> Check:
    reported = [g for g in gpus if g.get("ecc")]
    if not reported:
        return Check("gpu.ecc", "skip", "the GPUs report no ECC counters")
    problems = []
    for gpu in reported:
        ecc = gpu["ecc"]
        if ecc.get("uncorrected_volatile"):
            problems.append(f"GPU {gpu['index']}: {ecc['uncorrected_volatile']} uncorrected "
                            "ECC errors since the driver loaded")
        if ecc.get("retired_pages_pending") or ecc.get("remap_pending"):
            problems.append(f"GPU {gpu['index']}: memory pages wait to be retired")
        if ecc.get("remap_failed"):
            problems.append(f"GPU {gpu['index']}: row remapping failed")
    if problems:
        return Check("gpu.ecc", "fail", "; ".join(problems),
                     "reset the GPU (or reboot) so pending retirements take effect; a failed "
                     "remapping means the GPU needs replacing")
    return Check("gpu.ecc", "ok", f"no uncorrected errors or pending retirements on "
                 f"{len(reported)} GPU(s)")
