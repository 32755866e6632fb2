"""One snapshot of a job: its GPUs, processes, Python stacks and the machine, in bounded time.

The collectors run in parallel (NVML in a child process, the rest on daemon threads) and the
whole snapshot returns by `total_timeout` whatever hangs: what did not answer in time is
recorded as such, and is often the most telling finding of all.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hangwatch.collectors import flight
from hangwatch.collectors.bounded import Background
from hangwatch.collectors.discover import Found, discover
from hangwatch.collectors.gpu import collect_gpus
from hangwatch.collectors.procs import describe, is_python
from hangwatch.collectors.stackgroups import Collected, StackOptions, collect_groups
from hangwatch.collectors.stacks import find_py_spy
from hangwatch.collectors.system import collect_system
from hangwatch.core.evidence import BAD_STATUS, facts, gib_pair, process_label, telling_frame
from hangwatch.core.stackrules import StackRule

DISCOVERY_SHARE = 0.4  # of the total bound; the process details and stacks need the rest


@dataclass(frozen=True)
class SnapshotOptions:
    pids: tuple[int, ...] = ()  # explicit --pid, or the run wrapper's child
    match: str | None = None  # --match REGEX
    log_paths: tuple[Path, ...] = ()  # for log-writer discovery and the log's filesystem
    stacks: bool = True
    native: bool = False
    nvml_timeout: float = 10.0
    stack_timeout: float = 10.0
    total_timeout: float = 20.0
    known_tree: tuple[int, ...] = ()  # pids the caller already knows belong to the job
    stack_rules: tuple[StackRule, ...] = ()  # the rule set's `stacks:`: frames -> places


def take_snapshot(options: SnapshotOptions) -> dict[str, Any]:
    """A JSON-ready snapshot; returns within `options.total_timeout` (plus a few ms)."""
    taken_at = time.time()
    start = time.monotonic()
    deadline = start + options.total_timeout

    def left() -> float:
        return max(0.0, deadline - time.monotonic())

    errors: list[dict[str, str]] = []
    # NVML gets no more than the snapshot's own bound, so its probe is killed before we return.
    nvml_timeout = max(0.5, min(options.nvml_timeout, options.total_timeout - 0.5))
    gpus_job = Background(lambda: collect_gpus(nvml_timeout), "nvml")
    system_job = Background(lambda: collect_system(options.log_paths), "system")
    discovery_job = Background(lambda: discover(
        pids=options.pids, known_tree=options.known_tree, log_paths=options.log_paths,
        match=options.match), "discover")
    discovered, error = discovery_job.result(options.total_timeout * DISCOVERY_SHARE)
    if discovered is None:
        errors.append({"collector": "discovery", "error": error or "failed"})
        # The processes we were told about need no discovery.
        discovered = ([Found(pid, "pid", "--pid") for pid in options.pids]
                      + [Found(pid, "run-child", "started by hangwatch run")
                         for pid in options.known_tree if pid not in options.pids], [])
    found, notes = discovered

    records: dict[int, dict[str, Any]] = {}
    statuses_read = threading.Event()
    procs_job = Background(lambda: describe([(f.pid, f.found_by) for f in found], records,
                                            statuses_read=statuses_read), "procs")
    statuses_read.wait(min(2.0, left()))
    python_pids = [pid for pid, rec in list(records.items())
                   if is_python(rec) and rec.get("status") not in ("zombie", "dead")]
    py_spy = find_py_spy() if options.stacks else None
    # Every process's stack at once, grouped: who stands where, and who is the odd one out.
    stacks_job = Background(lambda: collect_groups(
        [f.pid for f in found], rules=options.stack_rules, py_spy=py_spy,
        options=StackOptions(native=options.native, timeout=options.stack_timeout,
                             budget=max(0.1, left() - 0.5))), "stacks") if options.stacks else None

    if procs_job.result(left())[1] == "timed out":
        errors.append({"collector": "processes", "error": "not finished within the snapshot's "
                                                          f"{options.total_timeout:g}s bound"})
    collected: Collected | None = None
    if stacks_job is not None:
        collected, error = stacks_job.result(left())
        if collected is None:
            errors.append({"collector": "stacks", "error": (
                f"not finished within the snapshot's {options.total_timeout:g}s bound"
                if error == "timed out" else error or "failed")})
    # A process that is not Python has no Python stack to tell of: its reason says so.
    stacks = {pid: dump for pid, dump in (collected.stacks if collected else {}).items()
              if pid in python_pids or "stack" in dump}
    notes = [*notes, *(collected.notes if collected else ())]
    nvml, error = gpus_job.result(left())
    if nvml is None:
        nvml = {"status": "timeout" if error == "timed out" else "error", "gpus": [],
                "detail": f"NVML did not answer within the snapshot's {options.total_timeout:g}s"
                          " bound" if error == "timed out" else f"NVML probe failed: {error}"}
    system, error = system_job.result(left())
    if error:
        errors.append({"collector": "system", "error": error})

    processes = _processes(found, dict(records), dict(stacks), set(python_pids), options,
                           complete=procs_job.done())
    gpus = _match_gpus(nvml.pop("gpus", []), processes)
    # The job's own interpreter first: it has torch, whose analyzer reads the dumps.
    pythons = [p["exe"] for p in processes if p.get("exe") and p["pid"] in python_pids]
    recorder = flight.collect(processes, timeout=left() - 0.5, pythons=pythons)
    return {
        "taken_at": taken_at,
        "elapsed_s": round(time.monotonic() - start, 2),
        "nvml": nvml,
        "gpus": gpus,
        "processes": processes,
        "system": system or {},
        "stacks": {"enabled": options.stacks, "native": options.native, "py_spy": py_spy},
        **_groups(collected),
        "discovery": {"log_paths": [str(p) for p in options.log_paths],
                      "match": options.match, "notes": notes},
        "errors": errors,
        "flight_recorder": recorder,
    }


def _groups(collected: Collected | None) -> dict[str, Any]:
    """stack_groups, suspects, stack_summary and members (empty when no stack was taken)."""
    if collected is None:
        return {"stack_groups": [], "suspects": [], "stack_summary": "", "members": []}
    groups = collected.groups.to_json()
    return {"stack_groups": groups["stack_groups"], "suspects": groups["suspects"],
            "stack_summary": groups["summary"],
            "members": [m.to_json() for m in collected.members]}


def _processes(found: Sequence[Found], records: dict[int, dict[str, Any]],
               stacks: dict[int, dict[str, Any]], python_pids: set[int],
               options: SnapshotOptions, *, complete: bool) -> list[dict[str, Any]]:
    out = []
    for f in found:
        record = {**records.get(f.pid, {"pid": f.pid, "found_by": f.found_by,
                                        "status": "unknown"}), "via": f.via}
        if not complete and "cmdline" not in record and record["status"] not in BAD_STATUS:
            record["incomplete"] = ("not fully read within the time bound (the process may be "
                                    "stuck in the kernel)")
        dump = stacks.get(f.pid, {})
        record["stack"] = dump.get("stack")
        if record["stack"] is None:
            record["stack_error"] = dump.get("error") or _no_stack_reason(
                record, f.pid in python_pids, options)
        out.append(record)
    return out


def _no_stack_reason(record: dict[str, Any], python: bool, options: SnapshotOptions) -> str:
    if record.get("status") in ("zombie", "dead"):
        return f"the process is {'a zombie' if record['status'] == 'zombie' else 'gone'}"
    if not options.stacks:
        return "stacks disabled (--no-stacks)"
    if not python:
        return "not a Python process"
    return "py-spy did not finish within the snapshot's time bound"


def _match_gpus(gpus: list[dict[str, Any]],
                processes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mark the GPU processes that belong to the job, and list each job process's GPUs."""
    by_pid = {p["pid"]: p for p in processes}
    for gpu in gpus:
        for gp in gpu.get("processes", []):
            gp["in_job"] = gp["pid"] in by_pid
            if gp["in_job"]:
                by_pid[gp["pid"]].setdefault("gpus", []).append(gpu["index"])
    return gpus


# --- short text for people: live output, the incident report, `hangwatch snapshot` ------------

def key_findings(snapshot: dict[str, Any]) -> list[str]:
    """A few lines that say the most: where the job's processes stand (the groups' summary,
    else where each process waits), each GPU, what is broken."""
    lines: list[str] = []
    processes = snapshot.get("processes", [])
    if not processes:
        lines.extend(snapshot.get("discovery", {}).get("notes", [])
                     or ["no process of the job found"])
    grouped = bool(snapshot.get("stack_groups"))
    if grouped and snapshot.get("stack_summary"):
        lines.append(snapshot["stack_summary"])
    stack_errors: dict[str, int] = {}
    for p in processes:
        frame = telling_frame(p.get("stack"))
        if frame:
            if not grouped:  # the groups say it, for every process at once
                lines.append(f"{process_label(p)}: {frame}")
        elif (p.get("status") not in ("zombie", "dead") and (why := p.get("stack_error"))
              and "not a Python process" not in why):
            stack_errors[why] = stack_errors.get(why, 0) + 1
        if p.get("status") in BAD_STATUS:
            lines.append(f"{process_label(p)} is {p['status']}")
    lines.extend(f"no stack for {n} process(es): {why}" for why, n in stack_errors.items())
    nvml = snapshot.get("nvml", {})
    if nvml.get("status", "ok") != "ok":
        lines.append(f"nvml: {nvml.get('status')}: {nvml.get('detail', '')}")
    lines.extend(_gpu_line(g) for g in snapshot.get("gpus", []))
    if processes and _foreign_gpu_pids(snapshot):
        lines.append("GPU processes do not match the job's pids (another pid namespace?): "
                     "GPU lines above cover every GPU")
    recorder = snapshot.get("flight_recorder")
    if recorder:
        dumps = recorder.get("dumps", [])
        lines.append(f"Flight Recorder: {len(dumps)} dump(s)"
                     + (f"; {recorder['desync']}" if recorder.get("desync") else "")
                     + (f"; {recorder['note']}" if recorder.get("note") else ""))
    found = facts(snapshot, phase=None, signals=())
    for key in ("shm", "disk"):
        if found.get(key, ("",))[0] == "full":
            lines.append(f"{key} full: {found[key][1]}")
    return lines


def collection_notes(snapshot: dict[str, Any], shown: Sequence[str] = ()) -> list[str]:
    """How discovery went and what did not answer, less what the key findings already say."""
    notes = snapshot.get("discovery", {}).get("notes", []) + [
        f"{e['collector']}: {e['error']}" for e in snapshot.get("errors", [])]
    return [note for note in notes if note not in shown]


def _gpu_line(gpu: dict[str, Any]) -> str:
    samples = gpu.get("utilization_samples") or []
    util = f"util {gpu.get('utilization', '?')}%"
    if len(samples) > 1:
        util += f" ({', '.join(map(str, samples))})"
    job = [str(p["pid"]) for p in gpu.get("processes", []) if p.get("in_job")]
    others = sum(1 for p in gpu.get("processes", []) if not p.get("in_job"))
    parts = [util, f"mem {gib_pair(gpu)}"]
    if gpu.get("temperature") is not None:
        parts.append(f"{gpu['temperature']}°C")
    if gpu.get("power_w") is not None:
        parts.append(f"{gpu['power_w']:g} W")
    if job:
        parts.append(f"job pids {', '.join(job)}")
    if others:
        parts.append(f"{others} other process(es)")
    return f"GPU{gpu.get('index')} {gpu.get('name') or ''}: {', '.join(parts)}"


def _foreign_gpu_pids(snapshot: dict[str, Any]) -> bool:
    gpu_procs = [p for g in snapshot.get("gpus", []) for p in g.get("processes", [])]
    return bool(gpu_procs) and not any(p.get("in_job") for p in gpu_procs)
