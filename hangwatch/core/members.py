"""Who a process of the job is: its rank where one can be read, and the peers it is compared with.

Ranks come from the environment launchers give their workers (torchrun and torch elastic,
DeepSpeed, accelerate, Slurm wrappers: `RANK`, `LOCAL_RANK`, `WORLD_SIZE`) or from `--rank N`
on the command line. A child that inherited its parent's rank (a DataLoader worker, a
subprocess of the rank) is not that rank: it is compared with the other children of ranks.
A Ray worker's title (`ray::Trainer.step`) names its actor class, its role; the method it
runs follows the dot. Only processes of one role are compared: eight ranks with each other,
the workers of all ranks with each other, never a launcher with a rank.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_RANK_ARG = re.compile(r"--(?P<local>local[-_])?rank(?:=(?P<value>\d+))?")
_LAUNCHER = re.compile(
    r"(?:^|[/ ])(?:torchrun|deepspeed|accelerate launch|accelerate-launch)(?:\s|$)"
    r"|torch\.distributed\.(?:run|launch)\b|deepspeed\.launcher\.(?:runner|launch)\b"
    r"|accelerate/commands/(?:launch|accelerate_cli)\.py|\bmpirun\b|\bsrun\b")
_SPAWNED = re.compile(r"multiprocessing\.spawn import spawn_main|--multiprocessing-fork"
                      r"|multiprocessing\.forkserver import main")
_RAY = re.compile(r"ray::(?P<role>[\w.-]*?)(?:\.(?P<method>[\w<>-]+))?(?:\s|$)")
_RAY_DAEMONS = ("raylet", "gcs_server", "ray/dashboard", "ray/autoscaler", "log_monitor")


@dataclass(frozen=True)
class ProcessFacts:
    """What /proc says of one process (None: could not be read, with `error` saying why)."""

    pid: int
    ppid: int | None = None
    comm: str | None = None
    cmdline: tuple[str, ...] | None = None
    env: Mapping[str, str] | None = None  # only the variables that name a rank
    error: str | None = None


@dataclass(frozen=True)
class Member:
    pid: int
    rank: int | None
    role: str  # "rank", "launcher", "ray::Trainer", "child of a rank", "process", ...
    label: str  # how a sentence names it: "rank 2", "pid 77 (ray::Trainer.step)"
    compared: bool  # whether it has peers to be compared with (ranks, workers, actors)
    local_rank: int | None = None
    world_size: int | None = None
    error: str | None = None  # why it could not be read, when it could not

    def to_json(self) -> dict[str, object]:
        return {"pid": self.pid, "rank": self.rank, "local_rank": self.local_rank,
                "world_size": self.world_size, "role": self.role, "label": self.label,
                **({"error": self.error} if self.error else {})}


def members(facts: Sequence[ProcessFacts]) -> list[Member]:
    """Each process as a member of the job, in the order given."""
    by_pid = {f.pid: f for f in facts}
    return [member(f, by_pid.get(f.ppid) if f.ppid is not None else None) for f in facts]


def member(facts: ProcessFacts, parent: ProcessFacts | None) -> Member:
    argv = list(facts.cmdline or ())
    title = " ".join(argv) or (facts.comm or "")
    env = facts.env or {}
    rank, local = _rank(env, argv)
    world = _int(env.get("WORLD_SIZE"))
    if facts.cmdline is None and facts.env is None and facts.error:
        return Member(facts.pid, None, "unreadable", f"pid {facts.pid}", False,
                      error=facts.error)
    if (ray := _RAY.match(title)) is not None:
        role = f"ray::{ray['role']}" if ray["role"] else "ray::IDLE"
        return Member(facts.pid, rank, role, f"pid {facts.pid} ({title.split()[0]})",
                      True, local, world, facts.error)
    if any(daemon in title for daemon in _RAY_DAEMONS):
        return Member(facts.pid, None, "ray daemon", f"pid {facts.pid} ({facts.comm})", False,
                      error=facts.error)
    parent_rank = _rank(parent.env or {}, list(parent.cmdline or ()))[0] if parent else None
    if rank is not None and parent_rank == rank:
        return Member(facts.pid, None, "child of a rank",
                      f"pid {facts.pid} (child of rank {rank})", True, None, world, facts.error)
    if rank is not None:
        return Member(facts.pid, rank, "rank", f"rank {rank}", True, local, world, facts.error)
    if _LAUNCHER.search(title):
        return Member(facts.pid, None, "launcher", f"pid {facts.pid} (launcher)", False,
                      error=facts.error)
    if _SPAWNED.search(title) and facts.ppid is not None:
        return Member(facts.pid, None, f"spawned by {facts.ppid}",
                      f"pid {facts.pid} (spawned by {facts.ppid})", True, error=facts.error)
    name = facts.comm or "?"
    return Member(facts.pid, None, "process", f"pid {facts.pid} ({name})", False,
                  error=facts.error)


def _rank(env: Mapping[str, str], argv: list[str]) -> tuple[int | None, int | None]:
    """(rank, local rank): `RANK` in the environment, else `--rank N` on the command line;
    the local rank stands for the rank when nothing else names one (one node)."""
    on_line: dict[bool, int] = {}
    for i, arg in enumerate(argv):
        found = _RANK_ARG.fullmatch(arg)
        if found is None:
            continue
        value = _int(found["value"] or (argv[i + 1] if i + 1 < len(argv) else None))
        if value is not None:
            on_line.setdefault(found["local"] is not None, value)
    local = _int(env.get("LOCAL_RANK"))
    local = local if local is not None else on_line.get(True)
    rank = _int(env.get("RANK"))
    rank = rank if rank is not None else on_line.get(False)
    return (rank if rank is not None else local), local


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None
