"""Advice chosen by evidence: facts read off a snapshot, matched against `diagnoses` rules.

A snapshot is plain data (see hangwatch/collectors/snapshot.py). Each fact has a value from
WHEN_KEYS and the concrete evidence behind it ("GPU0 util 100%, GPU1 util 99%"), which
travels with the advice it selects so a reader can judge it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any

import regex

from hangwatch.core.events import Advice
from hangwatch.core.model import DiagnosisRule
from hangwatch.core.stacktext import FRAME_LINE

# The conditions a `diagnoses` rule may use in `when`, with the values each accepts.
# A condition holds when the fact's value is one of the listed values (`stack` takes a regex).
WHEN_KEYS: dict[str, tuple[str, ...] | None] = {
    "gpus": ("busy", "idle", "mixed", "none"),
    "nvml": ("ok", "timeout", "missing", "error"),
    "processes": ("all_sleeping", "none_found", "some_running"),
    "process_status": ("disk-sleep", "zombie", "stopped", "dead"),
    "shm": ("full", "ok"),
    "disk": ("full", "ok"),
    "stack": None,
    "phase": None,
    "signal": None,
}

GPU_BUSY = 90  # % utilization: every job GPU at or above is "busy"
GPU_IDLE = 5  # % utilization: every job GPU at or below is "idle"
RUNNING_CPU = 10.0  # % CPU over the sample: a "sleeping" process this busy is really running
SHM_FULL = 95.0
DISK_FULL = 98.0
BAD_STATUS = ("disk-sleep", "zombie", "stopped", "dead")
_STATUS_WORDS = {"disk-sleep": "in uninterruptible disk sleep (D)", "zombie": "a zombie",
                 "stopped": "stopped (T)", "dead": "gone"}
# Frames that say only "this thread waits"; the frame that called them says on what.
_INTERNAL_FILES = regex.compile(r"(?:^|/)(?:threading|selectors|queue)\.py$"
                                r"|(?:^|/)concurrent/futures/_base\.py$")

Observation = tuple[str, str]  # (value, evidence)


def facts(snapshot: dict[str, Any], *, phase: str | None,
          signals: Sequence[str]) -> dict[str, tuple[str, str]]:
    """fact -> (value, evidence); several values of one fact are joined with ", "."""
    out = {key: (", ".join(dict.fromkeys(v for v, _ in obs)), "; ".join(e for _, e in obs))
           for key, obs in _observations(snapshot, phase, signals).items() if obs}
    telling = [(frame, f"{process_label(p)} in {frame}") for p in snapshot.get("processes", [])
               if (frame := telling_frame(p.get("stack")))]
    if telling:
        out["stack"] = (" | ".join(dict.fromkeys(f for f, _ in telling)),
                        "; ".join(e for _, e in telling))
    return out


def diagnose(rules: Sequence[DiagnosisRule], snapshot: dict[str, Any], *, phase: str | None,
             signals: Sequence[str]) -> list[Advice]:
    """Advice of every rule whose conditions all hold, each with the evidence that chose it."""
    observed = _observations(snapshot, phase, signals)
    frames = list(_frames(snapshot))
    advice: list[Advice] = []
    seen: set[str] = set()
    for rule in rules:
        reasons = []
        for key, values in rule.when:
            reason = (_stack_holds(values, frames) if key == "stack"
                      else _holds(key, values, observed.get(key, [])))
            if reason is None:
                break
            reasons.append(reason)
        else:
            because = "; ".join(reasons)
            for text in rule.advice:
                if text not in seen:
                    seen.add(text)
                    advice.append(Advice(text=text, because=because))
    return advice


def _holds(key: str, values: Sequence[str], observed: Sequence[Observation]) -> str | None:
    hits = [(value, evidence) for value, evidence in observed if value in values]
    if not hits:
        return None
    names = ", ".join(dict.fromkeys(value for value, _ in hits))
    return f"{key}={names} ({'; '.join(evidence for _, evidence in hits)})"


def _stack_holds(patterns: Sequence[str], frames: Sequence[tuple[str, str]]) -> str | None:
    compiled = [_compile(p) for p in patterns]
    hits = [(label, frame) for label, frame in frames if any(c.search(frame) for c in compiled)]
    if not hits:
        return None
    label, frame = hits[0]
    processes = len(dict.fromkeys(label for label, _ in hits))
    more = f" (and {processes - 1} more processes)" if processes > 1 else ""
    return f"stack: {label} in {frame}{more}"


@lru_cache(maxsize=256)
def _compile(pattern: str) -> regex.Pattern[str]:
    return regex.compile(pattern)


def _observations(snapshot: dict[str, Any], phase: str | None,
                  signals: Sequence[str]) -> dict[str, list[Observation]]:
    processes = snapshot.get("processes", [])
    out: dict[str, list[Observation]] = {
        "gpus": _gpus(snapshot),
        "nvml": _nvml(snapshot),
        "processes": _processes(processes) if "processes" in snapshot else [],
        "process_status": [(p["status"], f"{process_label(p)} is {_STATUS_WORDS[p['status']]}")
                           for p in processes if p.get("status") in BAD_STATUS],
        "shm": _shm(snapshot.get("system", {})),
        "disk": _disk(snapshot.get("system", {})),
        "phase": [(phase, f"stalled in phase {phase}")] if phase else [],
        "signal": [(s, f"signal {s} seen") for s in dict.fromkeys(signals)],
    }
    return out


def _gpus(snapshot: dict[str, Any]) -> list[Observation]:
    if "nvml" not in snapshot and "gpus" not in snapshot:
        return []
    gpus = job_gpus(snapshot)
    readings = [(g.get("index"), g["utilization"]) for g in gpus
                if g.get("utilization") is not None]
    if not readings:
        status = snapshot.get("nvml", {}).get("status", "unknown")
        why = "no GPU seen" if not gpus else "GPU utilization not readable"
        return [("none", f"{why} (NVML: {status})")]
    text = ", ".join(f"GPU{i} util {u}%" for i, u in readings)
    if all(u >= GPU_BUSY for _, u in readings):
        return [("busy", text)]
    if all(u <= GPU_IDLE for _, u in readings):
        return [("idle", text)]
    return [("mixed", text)]


def job_gpus(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    """The GPUs running a process of the job; all GPUs when none can be tied to the job (no
    process found, or NVML reports pids from another pid namespace)."""
    gpus: list[dict[str, Any]] = snapshot.get("gpus", [])
    mine = [g for g in gpus if any(p.get("in_job") for p in g.get("processes", []))]
    return mine or gpus


def _nvml(snapshot: dict[str, Any]) -> list[Observation]:
    nvml = snapshot.get("nvml")
    if not nvml:
        return []
    status = nvml.get("status", "error")
    if status == "ok":
        count = len(snapshot.get("gpus", []))
        return [("ok", f"{count} GPU(s) answered in {nvml.get('elapsed_s', '?')}s")]
    return [(status, nvml.get("detail") or status)]


def _processes(processes: Sequence[dict[str, Any]]) -> list[Observation]:
    live = [p for p in processes if p.get("status") not in ("zombie", "dead")]
    if not live:
        gone = len(processes)
        return [("none_found", "no process of the job found" if not gone
                 else f"no live process of the job ({gone} zombie or gone)")]
    running = [p for p in live if p.get("status") == "running"
               or (p.get("cpu_percent") or 0.0) >= RUNNING_CPU]
    if running:
        shown = ", ".join(f"{process_label(p)} {p.get('status')} at {p.get('cpu_percent', '?')}%"
                          f" CPU" for p in running[:3])
        more = f" and {len(running) - 3} more" if len(running) > 3 else ""
        return [("some_running", shown + more)]
    busiest = max(live, key=lambda p: p.get("cpu_percent") or 0.0)
    return [("all_sleeping", f"{len(live)} process(es), none running; highest CPU "
                             f"{busiest.get('cpu_percent', '?')}% ({process_label(busiest)})")]


def _shm(system: dict[str, Any]) -> list[Observation]:
    shm = system.get("shm") or {}
    if "used_percent" not in shm:
        return []
    text = (f"{shm['path']} {shm['used_percent']:g}% used "
            f"({human_bytes(shm['used'])} of {human_bytes(shm['total'])})")
    return [("full" if shm["used_percent"] >= SHM_FULL else "ok", text)]


def _disk(system: dict[str, Any]) -> list[Observation]:
    readable = [fs for fs in system.get("filesystems", []) if "used_percent" in fs]
    full = [fs for fs in readable if fs["used_percent"] >= DISK_FULL]
    shown = full or readable
    if not shown:
        return []
    text = "; ".join(f"filesystem of {fs['path']} {fs['used_percent']:g}% used "
                     f"({human_bytes(fs['free'])} free)" for fs in shown)
    return [("full" if full else "ok", text)]


def _frames(snapshot: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(process label, frame line) for every frame of every thread, innermost first."""
    for process in snapshot.get("processes", []):
        stack = process.get("stack")
        if stack:
            label = process_label(process)
            for frame in stack_frames(stack):
                yield label, frame


def stack_frames(stack: str) -> list[str]:
    return [line.strip() for line in stack.splitlines() if FRAME_LINE.match(line)]


def telling_frame(stack: str | None) -> str | None:
    """The innermost frame of the main thread (or the first thread) that is not
    threading/selectors plumbing: the line that says what the process waits for."""
    if not stack:
        return None
    threads: list[list[tuple[str, str]]] = []  # per thread: (frame line, file)
    main = None
    for line in stack.splitlines():
        if line.startswith("Thread "):
            threads.append([])
            if main is None and '"MainThread"' in line:
                main = len(threads) - 1
        elif m := FRAME_LINE.match(line):
            if not threads:
                threads.append([])
            threads[-1].append((line.strip(), m["file"]))
    chosen = threads[main if main is not None else 0] if threads else []
    for frame, file in chosen:
        if not _INTERNAL_FILES.search(file):
            return frame
    return chosen[0][0] if chosen else None


def process_label(process: dict[str, Any]) -> str:
    """`pid 4242 rank 3 (python)`: ranks named from the environment when it says."""
    env = process.get("env") or {}
    rank = process.get("rank", env.get("RANK", env.get("LOCAL_RANK")))
    label = f"pid {process.get('pid')}"
    if rank is not None:
        label += f" rank {rank}"
    name = process.get("name")
    return f"{label} ({name})" if name else label


def human_bytes(value: Any) -> str:
    """Bytes for people: MiB below 1 GiB, GiB above."""
    if not isinstance(value, (int, float)):
        return "?"
    return f"{value / 2**20:.0f} MiB" if value < 2**30 else f"{value / 2**30:.1f} GiB"


def gib_pair(gpu: dict[str, Any]) -> str:
    """Memory used of total, in GiB: `3.2/80.0 GiB`."""
    used, total = gpu.get("memory_used"), gpu.get("memory_total")
    if not isinstance(used, (int, float)) or not isinstance(total, (int, float)):
        return "?"
    return f"{used / 2**30:.1f}/{total / 2**30:.1f} GiB"
