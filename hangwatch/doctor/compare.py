"""`hangwatch doctor --compare node*.json`: what differs between the nodes of one job.

Versions, the NCCL/Gloo/rendezvous environment, the world size and GPU counts must agree on
every node; ranks must not repeat; clocks must be within a second of each other. Variables that
name local things (interfaces, HCAs, visible devices) may differ and are only shown.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hangwatch.doctor.render import printable
from hangwatch.errors import HangwatchError

MAY_DIFFER = {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_DEBUG_FILE",
              "NCCL_TOPO_FILE", "NCCL_TOPO_DUMP_FILE", "LOCAL_RANK", "CUDA_VISIBLE_DEVICES"}
UNIQUE = {"RANK", "NODE_RANK", "GROUP_RANK", "PET_NODE_RANK", "JAX_PROCESS_ID"}
CLOCK_SPREAD_S = 1.0
UNSET = None


@dataclass(frozen=True)
class Node:
    name: str
    file: str
    doc: dict[str, Any]

    def failed(self) -> list[str]:
        return [c.get("id", "?") for c in self.doc.get("checks", [])
                if isinstance(c, dict) and c.get("status") == "fail"]


@dataclass(frozen=True)
class Difference:
    key: str
    values: dict[str, Any]  # node name -> value (None: unset)
    must_agree: bool
    why: str

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "must_agree": self.must_agree, "why": self.why,
                "values": self.values}


def load_nodes(paths: list[Path]) -> list[Node]:
    docs = []
    for path in paths:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise HangwatchError(f"{path}: cannot read: {exc.strerror or exc}") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise HangwatchError(f"{path}: not JSON: {exc}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("facts"), dict):
            raise HangwatchError(f"{path}: not the output of `hangwatch doctor --json` "
                                 "(no `facts`)")
        docs.append((path, doc))
    hosts = Counter(str(doc.get("host") or path.stem) for path, doc in docs)
    return [Node(name if hosts[name] == 1 else f"{name} ({path})", str(path), doc)
            for path, doc in docs for name in [str(doc.get("host") or path.stem)]]


def compare(nodes: list[Node]) -> list[Difference]:
    out = []
    out += _same(nodes, "versions", lambda n: n.doc["facts"].get("versions") or {},
                 "nodes must run the same versions: a mismatch breaks or hangs collectives")
    env = {n.name: n.doc["facts"].get("env") or {} for n in nodes}
    for key in sorted({k for e in env.values() for k in e}):
        values = {name: e.get(key, UNSET) for name, e in env.items()}
        if key in UNIQUE:
            set_values = [v for v in values.values() if v is not UNSET]
            if len(set(set_values)) < len(set_values):
                out.append(Difference(f"env.{key}", values, True,
                                      "two nodes claim the same rank: rendezvous waits forever"))
        elif len(set(values.values())) > 1:
            local = key in MAY_DIFFER
            out.append(Difference(f"env.{key}", values, not local,
                                  "names something local to each node" if local else
                                  "every node must be launched with the same value"))
    out += _same(nodes, "", lambda n: {"world_size": n.doc["facts"].get("world_size")},
                 "every node must agree on the world size")
    out += _same(nodes, "gpus", lambda n: {"count": (n.doc["facts"].get("gpus") or {}).get(
        "count")}, "nodes with different GPU counts run different numbers of ranks")
    return out + _clocks(nodes)


def _same(nodes: list[Node], prefix: str, get: Any, why: str) -> list[Difference]:
    tables = {n.name: get(n) for n in nodes}
    out = []
    for key in sorted({k for t in tables.values() for k in t}):
        values = {name: t.get(key, UNSET) for name, t in tables.items()}
        if len(set(values.values())) > 1:
            out.append(Difference(f"{prefix}.{key}" if prefix else key, values, True, why))
    return out


def _clocks(nodes: list[Node]) -> list[Difference]:
    clocks = {n.name: n.doc["facts"].get("clock") or {} for n in nodes}
    out = []
    synced = {name: c.get("synchronized") for name, c in clocks.items()}
    if len(set(synced.values())) > 1:
        out.append(Difference("clock.synchronized", synced, False,
                              "some clocks are not synchronised: timestamps across nodes lie"))
    offsets = {name: c.get("offset_s") for name, c in clocks.items()}
    known = [v for v in offsets.values() if isinstance(v, (int, float))]
    if known and max(known) - min(known) > CLOCK_SPREAD_S:
        out.append(Difference("clock.offset_s", offsets, True,
                              f"clocks differ by {max(known) - min(known):.3g}s (more than "
                              f"{CLOCK_SPREAD_S:g}s)"))
    return out


def render(nodes: list[Node], differences: list[Difference]) -> list[str]:
    lines = [printable(f"compared {len(nodes)} nodes: {', '.join(n.name for n in nodes)}")]
    for diff in differences:
        label = "DIFFERS" if diff.must_agree else "differs"
        values = "  ".join(f"{name}={_show(v)}" for name, v in diff.values.items())
        lines.append(printable(f"  {label:<8} {diff.key:<28} {values}"))
        lines.append(f"           {diff.why}")
    for node in nodes:
        if node.failed():
            lines.append(printable(f"  note: {node.name} had failing checks: "
                                   f"{', '.join(node.failed())}"))
    must = sum(d.must_agree for d in differences)
    lines.append(f"{must} difference(s) that must agree, {len(differences) - must} that may"
                 if differences else "no differences")
    return lines


def _show(value: Any) -> str:
    return "(unset)" if value is UNSET else str(value)
