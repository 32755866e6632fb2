"""Network: the interfaces NCCL and Gloo are told to use exist and are up, and the master
address is one the other nodes can reach.

A NCCL_SOCKET_IFNAME that matches nothing makes NCCL fail to find an interface, or, with a
typo in an exclusion, pick docker0 and hang in its first collective.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Mapping
from pathlib import Path

from hangwatch.collectors.bounded import Background
from hangwatch.doctor.model import Check, Context, Outcome
from hangwatch.doctor.rendezvous import RESOLVE_S, whole

IFF_UP = 0x1


def run(ctx: Context) -> Outcome:
    states = interface_states(ctx)
    checks = [_nccl_ifname(ctx.env, states), _gloo_ifname(ctx.env, states),
              _master_address(ctx, states)]
    return checks, {}


def interface_states(ctx: Context) -> dict[str, bool]:
    """name -> up, from /sys/class/net (administratively up, and the link not down)."""
    states: dict[str, bool] = {}
    net = ctx.machine.sysfs / "class" / "net"
    with contextlib.suppress(OSError):
        for entry in net.iterdir():
            states[entry.name] = _is_up(entry)
    if not states:  # no sysfs (not Linux): what psutil lists, taken as up
        states = dict.fromkeys(ctx.machine.interfaces(), True)
    return states


def _is_up(path: Path) -> bool:
    try:
        flags = int((path / "flags").read_text().strip(), 16)
        operstate = (path / "operstate").read_text().strip()
    except (OSError, ValueError):
        return False
    return bool(flags & IFF_UP) and operstate != "down"


def _listing(states: dict[str, bool]) -> str:
    return ", ".join(f"{n}{'' if up else ' (down)'}" for n, up in sorted(states.items()))


def _nccl_ifname(env: Mapping[str, str], states: dict[str, bool]) -> Check:
    value = env.get("NCCL_SOCKET_IFNAME")
    if value is None:
        return Check("network.nccl_ifname", "skip", "NCCL_SOCKET_IFNAME not set: NCCL picks "
                     "an interface itself (ib*, then any but lo and docker*)")
    spec = value
    exclude = spec.startswith("^")
    spec = spec.removeprefix("^")
    exact = spec.startswith("=")
    names = [n for n in spec.removeprefix("=").split(",") if n]

    def matches(iface: str) -> bool:
        return any(iface == n if exact else iface.startswith(n) for n in names)

    chosen = {i: up for i, up in states.items() if matches(i) != exclude}
    if exclude:
        chosen = {i: up for i, up in chosen.items() if i != "lo"}
    usable = sorted(i for i, up in chosen.items() if up)
    if usable:
        return Check("network.nccl_ifname", "ok",
                     f"NCCL_SOCKET_IFNAME={value} selects {', '.join(usable)}")
    what = "is down" if chosen else "matches no interface"
    return Check("network.nccl_ifname", "fail",
                 f"NCCL_SOCKET_IFNAME={value} {what} (this node has {_listing(states)})",
                 "name the interface on the network the nodes share (a prefix like `eth` "
                 "or `=eth0` for an exact name), the same on every node")


def _gloo_ifname(env: Mapping[str, str], states: dict[str, bool]) -> Check:
    value = env.get("GLOO_SOCKET_IFNAME")
    if value is None:
        return Check("network.gloo_ifname", "skip", "GLOO_SOCKET_IFNAME not set")
    bad = [n for n in value.split(",") if not states.get(n)]
    if not bad:
        return Check("network.gloo_ifname", "ok", f"GLOO_SOCKET_IFNAME={value}: up")
    missing = [n for n in bad if n not in states]
    detail = (f"GLOO_SOCKET_IFNAME names {', '.join(bad)}: "
              f"{'no such interface' if missing else 'down'} (this node has {_listing(states)})")
    return Check("network.gloo_ifname", "fail", detail,
                 "Gloo wants exact interface names; use one that is up on every node")


def _master_address(ctx: Context, states: dict[str, bool]) -> Check:
    env = ctx.env
    host = env.get("MASTER_ADDR") or env.get("PET_MASTER_ADDR")
    if not host:
        return Check("network.master_address", "skip", "MASTER_ADDR not set")
    value, error = Background(lambda: ctx.machine.resolve(host), "resolve").result(
        ctx.bound(RESOLVE_S))
    if not value:
        return Check("network.master_address", "skip",
                     f"{host!r} does not resolve ({error}); rendezvous.master reports it")
    owners = {a: n for n, addrs in ctx.machine.interfaces().items() for a in addrs}
    local = [(a, owners[a]) for a in value if a in owners]
    if any(ipaddress.ip_address(a).is_loopback for a in value) and _spans_nodes(env):
        return Check("network.master_address", "fail",
                     f"MASTER_ADDR={host} is a loopback address ({', '.join(value)}) but the "
                     "job spans several nodes: the others cannot reach it",
                     "set MASTER_ADDR to the master node's address on the shared network")
    up = [f"{a} on {n}" for a, n in local if states.get(n, True)]
    if up:
        return Check("network.master_address", "ok", f"{host} is {', '.join(up)} (up)")
    if local:
        return Check("network.master_address", "fail",
                     f"{host} is {', '.join(f'{a} on {n}' for a, n in local)}, which is down",
                     "bring the interface up, or set MASTER_ADDR to an address that is up")
    rank = next((whole(env, k) for k in ("RANK", "NODE_RANK", "GROUP_RANK", "PET_NODE_RANK")
                 if whole(env, k) is not None), None)
    if rank == 0:
        return Check("network.master_address", "warn",
                     f"this node hosts rank 0 but {host} resolves to {', '.join(value)}, no "
                     "address of its own",
                     "unless a proxy or service forwards that address here, set MASTER_ADDR "
                     "to this node's address")
    return Check("network.master_address", "ok",
                 f"{host} resolves to {', '.join(value)} (another node)")


def _spans_nodes(env: Mapping[str, str]) -> bool:
    nnodes = env.get("PET_NNODES", "1").split(":")[-1]
    size, local = whole(env, "WORLD_SIZE"), whole(env, "LOCAL_WORLD_SIZE")
    return (nnodes.isdigit() and int(nnodes) > 1) or (
        size is not None and local is not None and size > local)
