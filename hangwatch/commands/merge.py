"""`hangwatch merge REPORT_DIR...`: the stack groups of several nodes taken together.

    hangwatch merge /shared/reports/node-*/20250101T120000Z-train_loop
    hangwatch merge node-a/report-dir node-b/report-dir --json

Each node's hangwatch grouped its own processes in its incident report (report.json); this
reads them all and groups across nodes, each process named by node and rank, in the same
shapes: JSON like report.json's `stack_groups` and `suspects`, or report.md's "Where the ranks
are" section.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TextIO

from hangwatch.core.merge import NodeReport, merge
from hangwatch.errors import ExitStatus, HangwatchError
from hangwatch.escape import jsontext, markdown
from hangwatch.packs.load import load_rule_set

MAX_REPORT_BYTES = 64 << 20  # a report.json holds stacks and a timeline, not more


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from hangwatch.reporters.incident import where_ranks_md

    nodes = [read_node(Path(p)) for p in args.reports]
    _name_apart(nodes)
    merged = {"nodes": [n.node for n in nodes],
              **merge(nodes, load_rule_set(args.rules).stack_rules)}
    if args.json:
        out.write(jsontext.dumps(merged, indent=2) + "\n")
        return ExitStatus.OK
    names = ", ".join(markdown.inline(n) for n in merged["nodes"])
    lines = [f"# Where the ranks are, across {len(nodes)} nodes", "", f"Nodes: {names}", ""]
    lines += where_ranks_md(merged) if merged["stack_groups"] else [
        "(no node's report holds stack groups: were stacks taken?)"]
    out.write("\n".join(lines).rstrip() + "\n")
    return ExitStatus.OK


def read_node(path: Path) -> NodeReport:
    """One node's report: `path` is its folder (or its report.json)."""
    file = path / "report.json" if path.is_dir() else path
    if not path.exists():
        raise HangwatchError(f"{path}: no such report folder")
    try:
        with file.open("rb") as fh:
            data = fh.read(MAX_REPORT_BYTES + 1)
    except OSError as exc:
        raise HangwatchError(f"{file}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_REPORT_BYTES:
        raise HangwatchError(f"{file}: larger than {MAX_REPORT_BYTES >> 20} MiB: not a report")
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HangwatchError(f"{file}: not a hangwatch report (not JSON: {exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("stall"), dict):
        raise HangwatchError(f"{file}: not a hangwatch incident report (no `stall`)")
    groups, suspects, members = (_records(doc, key, file)
                                 for key in ("stack_groups", "suspects", "members"))
    node = doc.get("host") if isinstance(doc.get("host"), str) and doc["host"] else None
    return NodeReport(node or path.resolve().parent.name or str(path), groups, suspects,
                      members)


def _records(doc: dict[str, Any], key: str, file: Path) -> tuple[dict[str, Any], ...]:
    value = doc.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise HangwatchError(f"{file}: `{key}` is not a list of objects")
    for item in value if key == "stack_groups" else ():
        if not (isinstance(item.get("pids"), list) and isinstance(item.get("ranks"), list)
                and len(item["pids"]) == len(item["ranks"])
                and all(isinstance(p, int) for p in item["pids"])):
            raise HangwatchError(f"{file}: a stack group without matching `pids` and `ranks`")
    return tuple(value)


def _name_apart(nodes: list[NodeReport]) -> None:
    """Two reports of one host (two runs, or hosts named alike) keep their own names."""
    seen: dict[str, int] = {}
    for i, node in enumerate(nodes):
        seen[node.node] = seen.get(node.node, 0) + 1
        if seen[node.node] > 1:
            nodes[i] = NodeReport(f"{node.node}#{seen[node.node]}", node.groups,
                                  node.suspects, node.members)
