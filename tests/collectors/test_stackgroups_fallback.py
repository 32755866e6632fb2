"""Without ptrace: ranks read from a checked-in fake /proc, placed by their kernel waits."""

from __future__ import annotations

from pathlib import Path

from hangwatch.collectors.bounded import CommandResult
from hangwatch.collectors.discover import ProcFS
from hangwatch.collectors.members import read_members
from hangwatch.collectors.stackgroups import StackOptions, collect_groups
from hangwatch.collectors.stacks import PTRACE_HINT
from hangwatch.packs.load import load_rule_set

PROC = Path(__file__).resolve().parents[1] / "fixtures" / "proc"
PIDS = [4000, 4100, 4101, 4102, 4103, 4105, 4300]
# What py-spy 0.4 prints when ptrace is refused (recorded from a run as another user).
REFUSED = CommandResult(1, "Permission Denied: Try running again with elevated permissions by "
                        "going 'sudo ...'\n",
                        "Error: Failed to find python version from target process\n")


def refused(argv, timeout, env):
    return REFUSED


def collect():
    return collect_groups(PIDS, rules=load_rule_set().stack_rules, procfs=ProcFS(PROC),
                          py_spy="py-spy", runner=refused, arch="x86_64",
                          options=StackOptions(budget=5))


def test_ranks_children_launchers_and_unreadable_processes_are_told_apart():
    members = {m.pid: m for m in read_members(PIDS, ProcFS(PROC))}
    assert [(members[p].rank, members[p].role) for p in (4100, 4101, 4102, 4103)] == [
        (0, "rank"), (1, "rank"), (2, "rank"), (3, "rank")]
    assert members[4100].world_size == 4 and members[4100].local_rank == 0
    assert (members[4105].rank, members[4105].role) == (None, "child of a rank")
    assert members[4105].label == "pid 4105 (child of rank 0)"
    assert members[4000].role == "launcher" and not members[4000].compared
    assert members[4300].role == "unreadable" and "No such file" in (members[4300].error or "")


def test_ptrace_refusal_is_said_once_with_the_fix_and_ranks_are_grouped_on_kernel_waits():
    result = collect()
    [note, *rest] = result.notes
    assert PTRACE_HINT in note and note.startswith("stacks of 6 process(es) not taken")
    assert "AmbientCapabilities=CAP_SYS_PTRACE" in note and "SYS_PTRACE]" in note
    assert not any(PTRACE_HINT in r for r in rest)
    [suspect] = result.groups.suspects
    assert suspect.rank == 2
    assert suspect.where == "[read on pipe, kernel: pipe_read]"
    assert suspect.why == ("rank 2 is in `[read on pipe, kernel: pipe_read]` (waiting for I/O) "
                           "while ranks 0,1,3 wait in `[futex, kernel: futex_wait_queue]` "
                           "(waiting on a lock or condition)")
    assert result.sources[4100] == "kernel"


def test_a_process_nothing_can_be_read_of_is_listed_not_dropped():
    groups = collect().groups.groups
    [unknown] = [g for g in groups if 4300 in g.pids]
    assert unknown.where.startswith("unknown: command line: ")
    assert sum(g.count for g in groups) == len(PIDS)


def test_the_launcher_waits_in_select_and_is_no_suspect():
    result = collect()
    [launcher] = [g for g in result.groups.groups if g.pids == (4000,)]
    assert launcher.where == "[select, kernel: do_select]"
    assert all(s.pid != 4000 for s in result.groups.suspects)
