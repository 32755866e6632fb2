"""A snapshot's processes, GPUs and machine as table rows and lines, for the reporters that
print them (report.md, `hangwatch snapshot`)."""

from __future__ import annotations

from typing import Any

from hangwatch.core.evidence import gib_pair, human_bytes
from hangwatch.core.ranks import span

PROCESS_COLUMNS = ("pid", "found by", "rank", "name", "status", "CPU %", "RSS", "threads",
                   "GPUs", "command")
GPU_COLUMNS = ("GPU", "name", "util %", "memory", "temp", "power", "processes")
GROUP_COLUMNS = ("where", "phase", "count", "ranks", "ranks not here")


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


def world_ranks(data: dict[str, Any]) -> list[int]:
    """The job's ranks: 0..WORLD_SIZE-1 when the members agree on it, else every rank seen."""
    sizes = {m.get("world_size") for m in data.get("members") or []
             if isinstance(m.get("world_size"), int)}
    if len(sizes) == 1:
        return list(range(sizes.pop()))
    return sorted({r for g in data.get("stack_groups") or [] for r in g.get("ranks") or []
                   if isinstance(r, int)})


def group_rows(data: dict[str, Any]) -> list[tuple[str, ...]]:
    """One row per stack group (GROUP_COLUMNS): where, phase, how many, its ranks (with their
    node when groups span nodes), and the job's ranks that are elsewhere."""
    world = world_ranks(data)
    rows: list[tuple[str, ...]] = []
    for g in data.get("stack_groups") or []:
        ranks = {r for r in g.get("ranks") or [] if isinstance(r, int)}
        elsewhere = [r for r in world if r not in ranks] if ranks else []
        rows.append((str(g.get("where", "")), str(g.get("phase") or ""), str(g.get("count", "")),
                     members_text(g), span([str(r) for r in elsewhere])))
    return rows


def members_text(group: dict[str, Any]) -> str:
    """`0-2,5`, `pids 17,19` for processes without a rank, `node-a: 0-3; node-b: 4-7`."""
    pids, ranks = group.get("pids") or [], group.get("ranks") or []
    nodes = group.get("nodes") or [""] * len(pids)
    by_node: dict[str, tuple[list[int], list[int]]] = {}
    for pid, rank, node in zip(pids, ranks, nodes, strict=False):
        mine = by_node.setdefault(str(node or ""), ([], []))
        (mine[0] if isinstance(rank, int) else mine[1]).append(rank if isinstance(rank, int)
                                                              else pid)
    parts = []
    for node, (ranked, unranked) in by_node.items():
        text = ", ".join(filter(None, [
            span([str(r) for r in ranked]),
            f"pid{'s' if len(unranked) > 1 else ''} {','.join(map(str, unranked))}"
            if unranked else ""]))
        parts.append(f"{node}: {text}" if node else text)
    return "; ".join(parts)
