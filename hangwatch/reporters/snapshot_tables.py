"""A snapshot's processes, GPUs and machine as table rows and lines, for the reporters that
print them (report.md, `hangwatch snapshot`)."""

from __future__ import annotations

from typing import Any

from hangwatch.core.evidence import gib_pair, human_bytes

PROCESS_COLUMNS = ("pid", "found by", "rank", "name", "status", "CPU %", "RSS", "threads",
                   "GPUs", "command")
GPU_COLUMNS = ("GPU", "name", "util %", "memory", "temp", "power", "processes")


def process_rows(snapshot: dict[str, Any]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for p in snapshot.get("processes", []):
        env = p.get("env") or {}
        rss = p.get("rss")
        rows.append((
            str(p.get("pid")), p.get("found_by", ""),
            p.get("rank", env.get("RANK", env.get("LOCAL_RANK", ""))),
            p.get("name") or "", p.get("status") or "",
            _text(p.get("cpu_percent")), human_bytes(rss) if rss is not None else "",
            _text(p.get("threads")), ", ".join(map(str, p.get("gpus", []))),
            " ".join(p.get("cmdline") or []),
        ))
    return rows


def gpu_rows(snapshot: dict[str, Any]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for g in snapshot.get("gpus", []):
        procs = ", ".join(f"{p['pid']}{'*' if p.get('in_job') else ''}"
                          for p in g.get("processes", []))
        power = g.get("power_w")
        rows.append((str(g.get("index")), g.get("name") or "", _text(g.get("utilization")),
                     gib_pair(g), _text(g.get("temperature")),
                     f"{power:g} W" if power is not None else "", procs))
    return rows


def _text(value: Any) -> str:
    return "" if value is None else f"{value:g}" if isinstance(value, float) else str(value)



def system_lines(system: dict[str, Any]) -> list[str]:
    lines = []
    if "load" in system:
        lines.append(f"load {', '.join(map(str, system['load']))} on "
                     f"{system.get('cpu_count')} CPUs ({system.get('cpu_percent')}% busy)")
    mem, swap = system.get("memory", {}), system.get("swap", {})
    if mem:
        lines.append(f"memory {mem.get('used_percent')}% used, "
                     f"{human_bytes(mem.get('available'))} available; "
                     f"swap {swap.get('used_percent')}% used")
    for fs in [system.get("shm") or {}, *system.get("filesystems", [])]:
        if "used_percent" in fs:
            lines.append(f"{fs['path']}: {fs['used_percent']}% used, "
                         f"{human_bytes(fs['free'])} free")
        elif fs:
            lines.append(f"{fs.get('path')}: {fs.get('error')}")
    files = system.get("open_files", {})
    if files:
        lines.append(f"open files: limit {files.get('soft_limit')} (hard "
                     f"{files.get('hard_limit')}); system {files.get('system_open', '?')} of "
                     f"{files.get('system_max', '?')}")
    return lines
