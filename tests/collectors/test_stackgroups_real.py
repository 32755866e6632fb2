"""Real hangs, real py-spy: four gloo ranks under torchrun, DataLoader workers, Ray-titled
actor processes. The collector finds the job's processes from its launcher, takes every stack
at once and names the odd one out."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hangwatch.collectors.discover import discover
from hangwatch.collectors.stackgroups import (
    Collected,
    StackOptions,
    collect_groups,
)
from hangwatch.collectors.stacks import PTRACE_HINT
from hangwatch.packs.load import load_rule_set
from tests.e2e.jobs.jobkit import free_port
from tests.fakes.jobs import wait_for

pytest.importorskip("torch")
JOBS = Path(__file__).resolve().parent / "stackjobs"
TORCHRUN = Path(sys.executable).parent / "torchrun"
RULES = load_rule_set().stack_rules


def collect(pids) -> Collected:
    result = collect_groups(pids, rules=RULES, options=StackOptions(budget=10))
    if any(PTRACE_HINT in note for note in result.notes):
        pytest.skip("py-spy may not attach to processes on this machine")
    return result


def collect_until(pids, holds, timeout: float = 20.0) -> Collected:
    """Stacks until `holds(result)`: a rank that wrote its ready mark may not yet be inside
    the call it blocks in."""
    deadline = time.monotonic() + timeout
    while True:
        result = collect(pids)
        if holds(result) or time.monotonic() > deadline:
            return result
        time.sleep(0.2)


def job_pids(root: int) -> list[int]:
    found, _ = discover(pids=[root], ps=None)
    return [f.pid for f in found]


def torchrun(jobs, tmp_path: Path, scenario: str, *, nproc: int = 4, ready: int = 4,
             env: dict[str, str] | None = None, port: int | None = None):
    if not TORCHRUN.exists():
        pytest.skip("torchrun is not installed beside this interpreter")
    marks = tmp_path / "ready"
    marks.mkdir(exist_ok=True)
    fifo = tmp_path / "ckpt.fifo"
    os.mkfifo(fifo)
    agent = jobs.start([str(TORCHRUN), "--nproc-per-node", str(nproc), "--master-port",
                        str(port or free_port()), str(JOBS / "ranks.py"), scenario],
                       env={"READY_DIR": str(marks), "CKPT_PATH": str(fifo), **(env or {})},
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: len(list(marks.iterdir())) >= ready, timeout=60)
    return agent


def ranks_of(result: Collected) -> dict[int, int]:
    return {m.rank: m.pid for m in result.members if m.role == "rank" and m.rank is not None}


def test_rank_blocked_in_data_loading_is_named_while_the_others_wait_in_all_reduce(
        jobs, tmp_path):
    agent = torchrun(jobs, tmp_path, "data")
    result = collect_until(job_pids(agent.pid), lambda r: len(r.groups.suspects) == 1
                           and r.groups.groups[0].count == 3)
    assert sorted(ranks_of(result)) == [0, 1, 2, 3]
    [suspect] = result.groups.suspects
    assert (suspect.rank, suspect.phase) == (2, "data_load")
    assert suspect.why == ("rank 2 is in `SilentShard.__getitem__` (data loading) while "
                           "ranks 0,1,3 wait in `all_reduce` (collective)")
    majority = result.groups.groups[0]
    assert (majority.ranks, majority.phase) == ((0, 1, 3), "collective")
    launcher = next(m for m in result.members if m.pid == agent.pid)
    assert launcher.role == "launcher"


def test_rank_0_in_a_save_while_the_others_wait_in_a_barrier(jobs, tmp_path):
    agent = torchrun(jobs, tmp_path, "save")
    result = collect_until(job_pids(agent.pid), lambda r: len(r.groups.suspects) == 1
                           and r.groups.groups[0].count == 3)
    [suspect] = result.groups.suspects
    assert (suspect.rank, suspect.where, suspect.phase) == (
        0, "save (torch/serialization.py)", "checkpoint_save")
    assert result.groups.groups[0].where == "barrier (torch/distributed/distributed_c10d.py)"


def test_ranks_all_in_the_same_barrier_have_no_suspect(jobs, tmp_path):
    # Four local ranks of a world of five: the fifth runs "on another node" (outside this
    # job's process tree) and never reaches the barrier.
    port = free_port()
    marks = tmp_path / "ready"
    marks.mkdir()
    jobs.start([sys.executable, str(JOBS / "ranks.py"), "barrier"],
               env={"RANK": "4", "WORLD_SIZE": "5", "JOB_WORLD": "5", "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": str(port), "READY_DIR": str(marks),
                    "REMOTE_RANK_STALLS": "1"},
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    agent = torchrun(jobs, tmp_path, "barrier", ready=5, port=port, env={"JOB_WORLD": "5"})
    result = collect_until(job_pids(agent.pid), lambda r: any(
        g.count == 4 and g.phase == "collective" for g in r.groups.groups))
    assert result.groups.suspects == ()
    rank_group = result.groups.groups[0]
    assert rank_group.ranks == (0, 1, 2, 3)
    assert rank_group.where == "barrier (torch/distributed/distributed_c10d.py)"
    assert result.groups.summary == "ranks 0-3 stuck as a whole in `barrier` (collective)"


def test_deadlocked_dataloader_worker_is_named_among_the_workers(jobs, tmp_path):
    agent = torchrun(jobs, tmp_path, "workers", nproc=1, ready=2)
    result = collect_until(job_pids(agent.pid), lambda r: len(r.groups.suspects) == 1)
    workers = [m for m in result.members if m.role == "child of a rank"]
    assert len(workers) >= 3  # three DataLoader workers (and torch's own helpers, if any)
    [suspect] = result.groups.suspects
    assert suspect.rank is None and suspect.where == "LockedShard.__getitem__ (ranks.py)"
    assert suspect.phase == "data_load"
    assert "(child of rank 0) is in `LockedShard.__getitem__` (data loading)" in suspect.why
    [rank] = [m for m in result.members if m.role == "rank"]
    assert rank.rank == 0


def test_ray_actor_blocked_elsewhere_is_named_by_its_title(jobs, tmp_path):
    marks = tmp_path / "ready"
    marks.mkdir()
    actors = [jobs.start([sys.executable, str(JOBS / "ray_actor.py"), what, "ray::Trainer.step"],
                         env={"READY_DIR": str(marks)}) for what in ("sync", "sync", "fetch")]
    wait_for(lambda: len(list(marks.iterdir())) == 3)
    # Ray's workers are not in the driver's process tree: once one is found, all are.
    found = job_pids(actors[0].pid)
    mine = [a.pid for a in actors]
    assert set(mine) <= set(found)
    result = collect_until(mine, lambda r: len(r.groups.suspects) == 1)
    assert {m.role for m in result.members} == {"ray::Trainer"}
    [suspect] = result.groups.suspects
    assert suspect.pid == actors[2].pid and suspect.where == "fetch_shard (ray_actor.py)"
    assert suspect.why == (f"pid {actors[2].pid} (ray::Trainer.step) is in `fetch_shard` while "
                           f"pids {actors[0].pid},{actors[1].pid} wait in `sync_gradients`")
