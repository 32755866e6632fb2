"""`hangwatch merge`: the stack groups of two nodes' incident reports, written by the real
report writer from stacks py-spy took of real ranks (tests/fixtures/stacks), taken together."""

from __future__ import annotations

import io
import json
from pathlib import Path

from hangwatch.cli import main
from hangwatch.core.events import StallEvent
from hangwatch.core.members import Member
from hangwatch.core.stackgroups import group, place_of
from hangwatch.core.stacktext import parse_dump
from hangwatch.packs.load import load_rule_set
from hangwatch.reporters.incident import write_incident

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "stacks" / "data"
RULES = load_rule_set().stack_rules


def node_report(tmp_path: Path, host: str, ranks: dict[int, str]) -> Path:
    """A report folder of `host`, whose ranks (rank -> recorded dump) were grouped there."""
    members = [Member(100 + r, r, "rank", f"rank {r}", True, r, 4) for r in ranks]
    places = {100 + r: place_of(parse_dump((FIXTURES / f"{name}.txt").read_text()), RULES)
              for r, name in ranks.items()}
    groups = group(members, {pid: p for pid, p in places.items() if p is not None}).to_json()
    snapshot = {"stack_groups": groups["stack_groups"], "suspects": groups["suspects"],
                "stack_summary": groups["summary"], "members": [m.to_json() for m in members],
                "processes": [], "gpus": []}
    stall = StallEvent("train_loop", "Training loop", "dist_init", 30.0, 10.0, 1_700_000_000.0)
    folder = write_incident(tmp_path / host, stall=stall, timeline=[], log_tail=[],
                            sources=["train.log"], snapshot=snapshot, advice=[])
    report = folder / "report.json"
    data = json.loads(report.read_text())
    assert data["host"]  # the writer names the machine; here, two machines are played
    report.write_text(json.dumps({**data, "host": host}))
    return folder


def merge(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(["merge", *args], out, err)
    return status, out.getvalue(), err.getvalue()


def test_two_nodes_are_grouped_together_naming_node_and_rank(tmp_path: Path):
    # node-a: ranks 0,1 both in all_reduce (on their own, stuck as a whole);
    # node-b: rank 2 in its data loading, rank 3 in all_reduce.
    a = node_report(tmp_path, "node-a", {0: "rank0", 1: "rank1"})
    b = node_report(tmp_path, "node-b", {2: "rank2", 3: "rank3"})
    status, out, err = merge(str(a), str(b), "--json")
    assert status == 0, err
    merged = json.loads(out)
    assert merged["nodes"] == ["node-a", "node-b"]
    majority = merged["stack_groups"][0]
    assert (majority["ranks"], majority["nodes"], majority["phase"]) == (
        [0, 1, 3], ["node-a", "node-a", "node-b"], "collective")
    assert majority["pids"] == [100, 101, 103] and majority["count"] == 3
    [suspect] = merged["suspects"]
    assert (suspect["node"], suspect["rank"], suspect["pid"], suspect["phase"]) == (
        "node-b", 2, 102, "data_load")
    assert suspect["why"] == ("rank 2 is in `SilentShard.__getitem__` (data loading) while "
                              "ranks 0,1,3 wait in `all_reduce` (collective)")
    assert merged["stack_summary"] == suspect["why"]

    status, text, _ = merge(str(a), str(b))
    assert status == 0
    assert text.startswith("# Where the ranks are, across 2 nodes\n")
    assert ("| `all_reduce (torch/distributed/distributed_c10d.py)` | collective | 3 | "
            "node-a: 0,1; node-b: 3 | 2 |") in text
    assert "- suspect: node-b: rank 2 is in `SilentShard.__getitem__`" in text


def test_ranks_that_agree_across_nodes_have_no_suspect(tmp_path: Path):
    a = node_report(tmp_path, "node-a", {0: "rank0", 1: "rank1"})
    b = node_report(tmp_path, "node-b", {3: "rank3"})
    status, out, _ = merge(str(a), str(b), "--json")
    assert status == 0
    merged = json.loads(out)
    assert merged["suspects"] == []
    assert merged["stack_summary"].startswith("ranks 0,1,3 stuck as a whole in `all_reduce`")


def test_bad_input_is_a_clear_message_and_exit_2(tmp_path: Path):
    status, _, err = merge(str(tmp_path / "nowhere"))
    assert (status, err) == (2, f"hangwatch: {tmp_path / 'nowhere'}: no such report folder\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    status, _, err = merge(str(empty))
    assert status == 2 and f"{empty / 'report.json'}: cannot read" in err
    (empty / "report.json").write_text("{not json")
    status, _, err = merge(str(empty))
    assert status == 2 and "not a hangwatch report (not JSON" in err
    (empty / "report.json").write_text('{"gpus": []}')
    status, _, err = merge(str(empty))
    assert status == 2 and "not a hangwatch incident report (no `stall`)" in err
    (empty / "report.json").write_text('{"stall": {}, "stack_groups": [{"pids": [1]}]}')
    status, _, err = merge(str(empty))
    assert status == 2 and "a stack group without matching `pids` and `ranks`" in err
