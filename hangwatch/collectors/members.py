"""Read each process of the job from /proc: parent, title, the variables that name its rank.

/proc is a parameter (a fake tree in tests). Reading `environ` and `cmdline` takes the
process's memory lock, which a process stuck in the kernel may hold: callers run this off
their main loop under a bound (collectors/bounded.py). A process that cannot be read is kept,
with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence

from hangwatch.collectors.discover import ProcFS
from hangwatch.core.members import Member, ProcessFacts, members

RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                  "NODE_RANK", "ROLE_RANK")


def read_facts(pid: int, procfs: ProcFS) -> ProcessFacts:
    entry = procfs.entry(pid)
    if entry is None:
        return ProcessFacts(pid, error="gone, or its /proc entry cannot be read")
    problems: list[str] = []
    argv: tuple[str, ...] | None = None
    env: dict[str, str] | None = None
    try:
        argv = procfs.argv(pid)
    except OSError as exc:
        problems.append(f"command line: {exc.strerror or exc}")
    try:
        env = {k: v for k, v in procfs.environ(pid).items() if k in RANK_VARIABLES}
    except OSError as exc:
        problems.append(f"environment: {exc.strerror or exc}")
    return ProcessFacts(pid, entry.ppid, entry.comm, argv, env,
                        "; ".join(problems) or None)


def read_members(pids: Sequence[int], procfs: ProcFS | None = None) -> list[Member]:
    """Every pid as a member of the job, its parents' facts read too (to tell a rank from a
    child that inherited its environment)."""
    procfs = procfs or ProcFS()
    facts = {pid: read_facts(pid, procfs) for pid in pids}
    for f in list(facts.values()):
        if f.ppid is not None and f.ppid not in facts and f.ppid > 1:
            facts[f.ppid] = read_facts(f.ppid, procfs)
    wanted = set(pids)
    return [m for m in members(list(facts.values())) if m.pid in wanted]
