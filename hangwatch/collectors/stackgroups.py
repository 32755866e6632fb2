"""Every stack of the job at once, grouped: who stands where, and who is the odd one out.

Stacks are taken with py-spy in parallel (bounded workers, a timeout per process, one deadline
for all). A process whose stack cannot be taken (ptrace refused, not Python, py-spy timed out)
is placed by what the kernel shows of its main thread instead; ptrace refusals are said once,
with the fix. Nothing is dropped: a process nothing can be read of is grouped as unknown,
with the reason.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hangwatch.collectors.bounded import run_command
from hangwatch.collectors.discover import ProcFS
from hangwatch.collectors.kernelwait import thread_waits
from hangwatch.collectors.members import read_members
from hangwatch.collectors.stacks import PTRACE_HINT, Runner, dump_stacks, find_py_spy
from hangwatch.core.kernelwait import kernel_place
from hangwatch.core.members import Member
from hangwatch.core.stackgroups import Place, StackGroups, group, place_of, unreadable_place
from hangwatch.core.stackrules import StackRule
from hangwatch.core.stacktext import parse_dump


@dataclass(frozen=True)
class StackOptions:
    native: bool = False
    timeout: float = 5.0  # per process
    budget: float = 10.0  # for every stack together
    workers: int = 8  # py-spy processes at once


@dataclass(frozen=True)
class Collected:
    groups: StackGroups
    members: tuple[Member, ...]
    stacks: dict[int, dict[str, Any]]  # pid -> {"stack": text} or {"error": why}
    notes: tuple[str, ...]
    elapsed_s: float
    sources: dict[int, str] = field(default_factory=dict)  # pid -> "py-spy", "kernel", "none"

    def to_json(self) -> dict[str, Any]:
        return {**self.groups.to_json(), "members": [m.to_json() for m in self.members],
                "notes": list(self.notes), "elapsed_s": round(self.elapsed_s, 2)}


def collect_groups(pids: Sequence[int], *, rules: Sequence[StackRule],
                   options: StackOptions = StackOptions(), procfs: ProcFS | None = None,
                   py_spy: str | None = None, runner: Runner = run_command,
                   arch: str | None = None) -> Collected:
    """Members, stacks and groups of `pids`; returns within `options.budget` (+1 s)."""
    started = time.monotonic()
    procfs = procfs or ProcFS()
    arch = arch or platform.machine()
    found = read_members(pids, procfs)
    stacks: dict[int, dict[str, Any]] = {}
    dump_stacks([m.pid for m in found if m.role != "unreadable"], stacks,
                py_spy=py_spy or find_py_spy(), timeout=options.timeout,
                deadline=started + options.budget, native=options.native,
                workers=options.workers, runner=runner)
    places: dict[int, Place] = {}
    sources: dict[int, str] = {}
    refused = 0
    for m in found:
        result = dict(stacks.get(m.pid) or {"error": m.error or "stack not taken in time"})
        place = None
        if "stack" in result:
            place = place_of(parse_dump(result["stack"]), rules, m.pid)
            sources[m.pid] = "py-spy"
        elif result["error"].startswith(PTRACE_HINT):
            refused += 1
            result["error"] = "ptrace refused"
        stacks[m.pid] = result
        if place is None:
            place = _kernel_place(m.pid, procfs, arch)
            sources[m.pid] = "kernel" if place is not None else "none"
        places[m.pid] = place or unreadable_place(result.get("error") or "empty stack")
    notes = [f"stacks of {refused} process(es) not taken: {PTRACE_HINT}; grouped on kernel "
             f"wait channels instead"] if refused else []
    notes += [f"{m.label}: {m.error}" for m in found if m.error]
    return Collected(group(found, places), tuple(found), stacks, tuple(notes),
                     time.monotonic() - started, sources)


def _kernel_place(pid: int, procfs: ProcFS, arch: str) -> Place | None:
    waits = thread_waits(pid, procfs)
    main = waits[0] if waits else None
    if main is None or (main.wchan is None and main.syscall is None):
        return None
    return kernel_place(main, arch)
