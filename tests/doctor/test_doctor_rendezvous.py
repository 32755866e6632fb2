"""Rendezvous: the launcher's variables, the master reached over real 127.0.0.1 sockets, and
the holder of a taken master port found in the real /proc."""

from __future__ import annotations

import socket
import sys
import threading
import time

from hangwatch.doctor import rendezvous
from tests.fakes.doctor import by_id, context

LISTENER = """
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
print(s.getsockname()[1], flush=True)
time.sleep(60)
"""


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torch_env(port: int, rank: int = 1, **extra: str) -> dict[str, str]:
    return {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
            "WORLD_SIZE": "4", **extra}


def test_worker_with_master_port_closed_fails_naming_the_master():
    port = closed_port()
    checks, _ = rendezvous.run(context(torch_env(port)))
    master = by_id(checks, "rendezvous.master")
    assert master.status == "fail"
    assert f"master 127.0.0.1:{port}" in master.detail
    assert "connection refused" in master.detail
    assert "start the master" in master.fix


def test_worker_with_listening_master_passes():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        checks, facts = rendezvous.run(context(torch_env(port)))
    assert by_id(checks, "rendezvous.master").status == "ok"
    assert by_id(checks, "rendezvous.env").detail == "rank 1 of 4"
    assert (facts["world_size"], facts["rank"]) == (4, 1)
    assert facts["env"]["MASTER_PORT"] == str(port)


def test_rank0_with_port_taken_fails_naming_the_holder(jobs):
    holder = jobs.start([sys.executable, "-c", LISTENER], stdout=-1)
    port = int(holder.stdout.readline())
    checks, _ = rendezvous.run(context(torch_env(port, rank=0)))
    master = by_id(checks, "rendezvous.master")
    assert master.status == "fail"
    assert f"port {port} (MASTER_ADDR/MASTER_PORT) on this node" in master.detail
    assert f"taken by pid {holder.pid} (" in master.detail
    assert "python" in master.detail
    assert f"kill {holder.pid}" in master.fix


def test_rank0_with_port_free_passes():
    port = closed_port()
    checks, _ = rendezvous.run(context(torch_env(port, rank=0)))
    assert by_id(checks, "rendezvous.master").status == "ok"
    assert "is free" in by_id(checks, "rendezvous.master").detail


def test_without_rank_the_node_owning_the_address_checks_its_port():
    port = closed_port()
    env = {"PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": str(port), "PET_NNODES": "2",
           "PET_NPROC_PER_NODE": "8"}
    checks, facts = rendezvous.run(context(env, interfaces=lambda: {"lo": ["127.0.0.1"]}))
    assert "is free" in by_id(checks, "rendezvous.master").detail
    assert facts["world_size"] == 16


def test_jax_coordinator_refusing_is_a_fail():
    port = closed_port()
    env = {"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "JAX_NUM_PROCESSES": "2",
           "JAX_PROCESS_ID": "1"}
    checks, _ = rendezvous.run(context(env))
    coordinator = by_id(checks, "rendezvous.coordinator")
    assert coordinator.status == "fail"
    assert f"JAX coordinator 127.0.0.1:{port}" in coordinator.detail


def test_rank_at_or_above_world_size_is_a_fail():
    checks, _ = rendezvous.run(context(torch_env(closed_port(), rank=4)))
    env = by_id(checks, "rendezvous.env")
    assert env.status == "fail"
    assert "RANK=4 is at or above WORLD_SIZE=4" in env.detail


def test_half_configured_env_names_what_is_missing():
    checks, _ = rendezvous.run(context({"MASTER_ADDR": "10.0.0.1", "RANK": "1",
                                        "LOCAL_RANK": "x"}))
    detail = by_id(checks, "rendezvous.env").detail
    assert "LOCAL_RANK='x' is not a whole number" in detail
    assert "MASTER_ADDR, RANK set but MASTER_PORT, WORLD_SIZE not" in detail


def test_torchrun_node_rank_beyond_node_count_is_a_fail():
    checks, _ = rendezvous.run(context({"PET_NNODES": "1:2", "PET_NODE_RANK": "2"}))
    assert "PET_NODE_RANK=2 is at or above the node count" in by_id(
        checks, "rendezvous.env").detail


def test_no_rendezvous_env_is_skipped_with_the_reason():
    checks, facts = rendezvous.run(context({"NCCL_DEBUG": "INFO", "PATH": "/bin"}))
    assert [(c.id, c.status) for c in checks] == [("rendezvous.env", "skip")]
    assert "single-process" in checks[0].detail
    assert facts["env"] == {"NCCL_DEBUG": "INFO"}


def test_unresolvable_master_is_a_fail_within_its_bound():
    never = threading.Event()

    def dead_resolver(host: str) -> list[str]:
        never.wait(30)
        return []

    started = time.monotonic()
    checks, _ = rendezvous.run(context(torch_env(29500, MASTER_ADDR="node-a"), timeout=2.0,
                                       resolve=dead_resolver))
    assert time.monotonic() - started < 2.0
    master = by_id(checks, "rendezvous.master")
    assert master.status == "fail"
    assert "cannot resolve the master host 'node-a'" in master.detail
    assert "no answer from the resolver" in master.detail
    never.set()
