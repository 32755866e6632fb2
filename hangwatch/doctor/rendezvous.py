"""Rendezvous: the launcher's variables are complete and consistent, a worker reaches the
master, and on the master node the port is free (or we say which process holds it).

torch's `env://` reads MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE; torchrun takes its own options
from `PET_*` variables; JAX reads JAX_COORDINATOR_ADDRESS and its process counts.
"""

from __future__ import annotations

import errno
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from hangwatch.collectors.bounded import Background
from hangwatch.doctor.holders import (
    describe_pid,
    find_holders,
    listening_inodes,
    unreadable_note,
)
from hangwatch.doctor.model import Check, Context, Facts, Outcome
from hangwatch.escape.redact import redact_env_value

TORCH_VARS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
              "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK")
JAX_VARS = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")
# Variables that shape how ranks find each other and talk: compared across nodes.
FACT_ENV = re.compile(r"(?:NCCL_|GLOO_|PET_|TORCHELASTIC_|TORCH_NCCL_|TORCH_DISTRIBUTED_)\w+"
                      r"|CUDA_VISIBLE_DEVICES|" + "|".join((*TORCH_VARS, *JAX_VARS)))
WHOLE_NUMBERS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK",
                 "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE",
                 "PET_NODE_RANK", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")
# (index, count): the index must be below the count. GROUP_* is torchrun's node (agent) rank
# and count, ROLE_* the rank within the worker role.
BELOW = (("RANK", "WORLD_SIZE"), ("LOCAL_RANK", "LOCAL_WORLD_SIZE"),
         ("GROUP_RANK", "GROUP_WORLD_SIZE"), ("ROLE_RANK", "ROLE_WORLD_SIZE"),
         ("JAX_PROCESS_ID", "JAX_NUM_PROCESSES"))
# (part, whole): the part may equal the whole (one node: torchrun sets LOCAL_WORLD_SIZE ==
# WORLD_SIZE), only exceed it.
NOT_ABOVE = (("LOCAL_WORLD_SIZE", "WORLD_SIZE"), ("ROLE_WORLD_SIZE", "WORLD_SIZE"))
CONNECT_S = 3.0
RESOLVE_S = 3.0


def env_facts(env: Mapping[str, str]) -> dict[str, str]:
    return {k: redact_env_value(k, v) for k, v in sorted(env.items()) if FACT_ENV.fullmatch(k)}


def whole(env: Mapping[str, str], name: str) -> int | None:
    value = env.get(name, "").strip()
    return int(value) if value.isdigit() else None


def run(ctx: Context) -> Outcome:
    env = ctx.env
    facts: Facts = {"env": env_facts(env), "world_size": world_size(env),
                    "rank": whole(env, "RANK")}
    if not any(k in env for k in (*TORCH_VARS, *JAX_VARS)) and not any(
            k.startswith("PET_") for k in env):
        return [Check("rendezvous.env", "skip", "no rendezvous variables (MASTER_ADDR, "
                      "RANK, PET_*, JAX_COORDINATOR_ADDRESS): a single-process job, or the "
                      "launcher sets them later")], facts
    checks = [_consistency(env)]
    for endpoint in endpoints(env):
        checks.append(_master(ctx, endpoint))
    return checks, facts


def world_size(env: Mapping[str, str]) -> int | None:
    if (size := whole(env, "WORLD_SIZE")) is not None:
        return size
    nnodes = env.get("PET_NNODES", "").split(":")[-1]
    nproc = whole(env, "PET_NPROC_PER_NODE")
    if nnodes.isdigit() and nproc is not None:
        return int(nnodes) * nproc
    return whole(env, "JAX_NUM_PROCESSES")


def _consistency(env: Mapping[str, str]) -> Check:
    problems: list[str] = []
    for name in WHOLE_NUMBERS:
        if name in env and whole(env, name) is None:
            problems.append(f"{name}={env[name]!r} is not a whole number")
    for name in ("MASTER_PORT", "PET_MASTER_PORT"):
        if name in env and not 0 < (whole(env, name) or 0) < 65536:
            problems.append(f"{name}={env[name]!r} is not a port (1-65535)")
    for index, count in BELOW:
        i, n = whole(env, index), whole(env, count)
        if i is not None and n is not None and i >= n:
            problems.append(f"{index}={i} is at or above {count}={n}")
    for part, total in NOT_ABOVE:
        i, n = whole(env, part), whole(env, total)
        if i is not None and n is not None and i > n:
            problems.append(f"{part}={i} is above {total}={n}")
    if whole(env, "WORLD_SIZE") == 0:
        problems.append("WORLD_SIZE=0: there must be at least one process")
    nnodes = env.get("PET_NNODES", "").split(":")[-1]
    node = whole(env, "PET_NODE_RANK")
    if nnodes.isdigit() and node is not None and node >= int(nnodes):
        problems.append(f"PET_NODE_RANK={node} is at or above the node count "
                        f"PET_NNODES={env['PET_NNODES']}")
    problems += _missing(env)
    jax = env.get("JAX_COORDINATOR_ADDRESS")
    if jax is not None and _host_port(jax) is None:
        problems.append(f"JAX_COORDINATOR_ADDRESS={jax!r} is not HOST:PORT")
    notes = []
    if "MASTER_ADDR" in env and env.get("PET_MASTER_ADDR", env["MASTER_ADDR"]) != env[
            "MASTER_ADDR"]:
        notes.append(f"MASTER_ADDR={env['MASTER_ADDR']} but torchrun's PET_MASTER_ADDR="
                     f"{env['PET_MASTER_ADDR']}: torchrun's value is the one its workers get")
    if problems:
        return Check("rendezvous.env", "fail", "; ".join(problems + notes),
                     "fix the launcher's variables: every rank needs MASTER_ADDR, MASTER_PORT, "
                     "WORLD_SIZE and a distinct RANK below WORLD_SIZE")
    if notes:
        return Check("rendezvous.env", "warn", "; ".join(notes),
                     "set the master address once, in the launcher's options")
    return Check("rendezvous.env", "ok", _summary(env))


def _missing(env: Mapping[str, str]) -> list[str]:
    """env:// needs all four; one set without the others is a launcher that half-configured."""
    torch_set = [k for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE") if k in env]
    if not torch_set or len(torch_set) == 4:
        return []
    missing = [k for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE") if k not in env]
    return [f"{', '.join(torch_set)} set but {', '.join(missing)} not: init_process_group("
            "init_method='env://') needs all four"]


def _summary(env: Mapping[str, str]) -> str:
    parts = []
    if "RANK" in env and "WORLD_SIZE" in env:
        parts.append(f"rank {env['RANK']} of {env['WORLD_SIZE']}")
    if "PET_NNODES" in env:
        parts.append(f"torchrun: {env['PET_NNODES']} node(s) x "
                     f"{env.get('PET_NPROC_PER_NODE', '?')} process(es)")
    if "JAX_COORDINATOR_ADDRESS" in env:
        parts.append(f"JAX process {env.get('JAX_PROCESS_ID', '?')} of "
                     f"{env.get('JAX_NUM_PROCESSES', '?')}")
    return ", ".join(parts) or "rendezvous variables consistent"


@dataclass(frozen=True)
class Endpoint:
    check_id: str
    label: str  # what the user calls it: "master", "JAX coordinator"
    variables: str
    host: str
    port: int
    index: int | None  # this process's (or node's) rank: 0 hosts the endpoint


def endpoints(env: Mapping[str, str]) -> list[Endpoint]:
    out = []
    rank = next((whole(env, k) for k in ("RANK", "NODE_RANK", "GROUP_RANK", "PET_NODE_RANK")
                 if whole(env, k) is not None), None)
    for addr, port in (("MASTER_ADDR", "MASTER_PORT"), ("PET_MASTER_ADDR", "PET_MASTER_PORT")):
        if env.get(addr) and 0 < (whole(env, port) or 0) < 65536:
            out.append(Endpoint("rendezvous.master", "master", f"{addr}/{port}", env[addr],
                                int(env[port]), rank))
            break
    else:
        rdzv = _host_port(env.get("PET_RDZV_ENDPOINT", ""), default_port=29400)
        if rdzv is not None and env.get("PET_RDZV_BACKEND", "c10d") == "c10d":
            out.append(Endpoint("rendezvous.master", "rendezvous endpoint", "PET_RDZV_ENDPOINT",
                                *rdzv, None))
    jax = _host_port(env.get("JAX_COORDINATOR_ADDRESS", ""))
    if jax is not None:
        out.append(Endpoint("rendezvous.coordinator", "JAX coordinator",
                            "JAX_COORDINATOR_ADDRESS", *jax, whole(env, "JAX_PROCESS_ID")))
    return out


def _host_port(text: str, default_port: int | None = None) -> tuple[str, int] | None:
    match = re.fullmatch(r"\[?([^\[\]]+?)\]?(?::(\d{1,5}))?", text.strip())
    if not match or not match.group(1):
        return None
    port = int(match.group(2)) if match.group(2) else default_port
    return (match.group(1), port) if port is not None and 0 < port < 65536 else None


def _master(ctx: Context, ep: Endpoint) -> Check:
    addresses, error = _resolve(ctx, ep.host)
    if addresses is None:
        return Check(ep.check_id, "fail", f"cannot resolve the {ep.label} host {ep.host!r} "
                     f"({ep.variables}): {error}",
                     f"set {ep.variables.split('/')[0]} to an address or a name every node "
                     "resolves")
    hosts_it = ep.index == 0 if ep.index is not None else _is_local(ctx, addresses)
    return _port_free(ctx, ep) if hosts_it else _reachable(ctx, ep, addresses)


def _resolve(ctx: Context, host: str) -> tuple[list[str] | None, str | None]:
    # getaddrinfo has no timeout of its own: a dead DNS server would hold it for minutes.
    value, error = Background(lambda: ctx.machine.resolve(host), "resolve").result(
        ctx.bound(RESOLVE_S))
    if error == "timed out":
        error = f"no answer from the resolver within {ctx.bound(RESOLVE_S):g}s"
    return (value, None) if value else (None, error or "no address")


def _is_local(ctx: Context, addresses: list[str]) -> bool:
    mine = {a for addrs in ctx.machine.interfaces().values() for a in addrs}
    return bool(mine & set(addresses))


def _port_free(ctx: Context, ep: Endpoint) -> Check:
    where = f"port {ep.port} ({ep.variables}) on this node, which hosts the {ep.label}"
    sock = ctx.machine.sockets(socket.AF_INET, socket.SOCK_STREAM)
    try:
        # As the store does: a port whose last user is in TIME_WAIT is free to listen on.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("", ep.port))
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            return Check(ep.check_id, "fail", f"cannot listen on {where}: {exc.strerror}",
                         "pick a port above 1024 that this user may bind")
        return _taken(ctx, ep, where)
    finally:
        sock.close()
    return Check(ep.check_id, "ok", f"{where} is free")


def _taken(ctx: Context, ep: Endpoint, where: str) -> Check:
    proc = ctx.machine.proc
    holders = find_holders(proc, listening_inodes(proc, ep.port))
    pids = sorted({pid for pids in holders.pids.values() for pid in pids})
    if pids:
        who = ", ".join(describe_pid(proc, pid) for pid in pids)
        fix = (f"end it if it is a run that is over (kill {' '.join(map(str, pids))}), or "
               "choose another MASTER_PORT on every node")
    else:
        who = "a process we cannot see" + (unreadable_note(holders) or
                                           " (in another container or network namespace)")
        fix = (f"`ss -ltnp 'sport = :{ep.port}'` as root names it; end it or choose another "
               "MASTER_PORT on every node")
    return Check(ep.check_id, "fail", f"{where} is taken by {who}", fix)


def _reachable(ctx: Context, ep: Endpoint, addresses: list[str]) -> Check:
    target = f"{ep.label} {ep.host}:{ep.port}"
    timeout = ctx.bound(CONNECT_S)
    error: OSError | None = None
    for address in addresses:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        sock = ctx.machine.sockets(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect((address, ep.port))
            return Check(ep.check_id, "ok", f"{target} ({address}) accepts connections")
        except OSError as exc:
            error = exc
        finally:
            sock.close()
    if isinstance(error, TimeoutError):
        return Check(ep.check_id, "fail", f"{target}: no answer within {timeout:g}s",
                     "a firewall or security group drops the port, or the address is not the "
                     "master's on the network the nodes share: open the port between the nodes")
    if error is not None and error.errno == errno.ECONNREFUSED:
        return Check(ep.check_id, "fail", f"{target}: connection refused (nothing listens "
                     "there)", "start the master (rank 0) first, or fix "
                     f"{ep.variables}; `hangwatch doctor` on the master says if its port is free")
    reason = error.strerror if error is not None and error.strerror else str(error)
    return Check(ep.check_id, "fail", f"{target}: {reason}",
                 "check the route between the nodes and the master's address")
