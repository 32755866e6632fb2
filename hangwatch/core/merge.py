"""Stack groups of several nodes taken together (`hangwatch merge`): each node's report says
where its processes stand; ranks are compared across nodes, each process named by node.

Ranks are global (torchrun's `RANK`), so the ranks of every node are peers: when a clear
majority of them agree, the others are suspects. Processes without a rank (launchers, workers)
were compared on their own node already; their suspects are kept, with the node's name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hangwatch.core.members import Member
from hangwatch.core.stackgroups import Place, StackGroups, group
from hangwatch.core.stackrules import StackRule, rule_for


@dataclass(frozen=True)
class NodeReport:
    """One node's stack groups, as its report.json has them."""

    node: str
    groups: tuple[Mapping[str, Any], ...]
    suspects: tuple[Mapping[str, Any], ...]
    members: tuple[Mapping[str, Any], ...]


def merge(nodes: Sequence[NodeReport], rules: Sequence[StackRule]) -> dict[str, Any]:
    """stack_groups (each with `nodes` beside `pids` and `ranks`), suspects (each with its
    `node`), stack_summary and members, in the shapes a report.json has."""
    members: list[Member] = []
    places: dict[int, Place] = {}
    origin: dict[int, tuple[str, int]] = {}  # our id -> (node, pid): pids repeat across nodes
    for node in nodes:
        known = {m.get("pid"): m for m in node.members}
        for g in node.groups:
            place = _place(g, rules)
            for pid, rank in zip(g.get("pids") or [], g.get("ranks") or [], strict=False):
                ident = len(origin) + 1
                origin[ident] = (node.node, int(pid))
                members.append(_member(ident, rank, known.get(pid)))
                places[ident] = place
    found = group(members, places)
    suspects = [_suspect_json(s.to_json(), origin) for s in found.suspects]
    # Suspects among processes without a rank were found on their own node.
    suspects += [{**s, "node": node.node} for node in nodes for s in node.suspects
                 if s.get("rank") is None]
    summary = "; ".join(s["why"] for s in suspects) if suspects else found.summary
    return {"stack_groups": [_group_json(g, origin) for g in _json_groups(found)],
            "suspects": suspects, "stack_summary": summary,
            "members": [{**dict(m), "node": node.node} for node in nodes for m in node.members]}


def _place(g: Mapping[str, Any], rules: Sequence[StackRule]) -> Place:
    where = str(g.get("where", "?"))
    frames = tuple(str(f) for f in g.get("frames") or [])
    key = tuple(str(k) for k in g.get("key") or [where])
    phase = g.get("phase") if isinstance(g.get("phase"), str) else None
    # The words of the rule that gave the phase: it may know a frame next to `where`.
    known = (rule_for(f, rules) for f in (where, *frames))
    rule = next((r for r in known if r is not None and r.phase == phase), None) if phase else None
    return Place(where, where.split(" (", 1)[0], key, frames, phase,
                 rule.label if rule is not None else None)


def _member(ident: int, rank: Any, known: Mapping[str, Any] | None) -> Member:
    """Ranks are peers across nodes; any other process is compared on its own node only."""
    if isinstance(rank, int) and not isinstance(rank, bool):
        size = (known or {}).get("world_size")
        return Member(ident, rank, "rank", f"rank {rank}", True,
                      world_size=size if isinstance(size, int) else None)
    role = str((known or {}).get("role") or "process")
    return Member(ident, None, role, str((known or {}).get("label") or role), False)


def _json_groups(found: StackGroups) -> list[dict[str, Any]]:
    return [g.to_json() for g in found.groups]


def _group_json(g: dict[str, Any], origin: Mapping[int, tuple[str, int]]) -> dict[str, Any]:
    ids = list(g["pids"])
    return {**g, "pids": [origin[i][1] for i in ids], "nodes": [origin[i][0] for i in ids]}


def _suspect_json(s: dict[str, Any], origin: Mapping[int, tuple[str, int]]) -> dict[str, Any]:
    node, pid = origin[int(s["pid"])]
    return {**s, "pid": pid, "node": node}
