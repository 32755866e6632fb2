from __future__ import annotations

import io
import json
from pathlib import Path

from hangwatch.cli import main
from hangwatch.packs.load import builtin_rules_dir, load_pack_text


def rules(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(["rules", *args], out, err)
    return status, out.getvalue(), err.getvalue()


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


MY_PACK = """\
pack: mytrainer
description: My trainer's markers.
phases:
  - id: my_eval
    title: Evaluation
    start: '\\[EVAL\\] begin'
    done: '\\[EVAL\\] end'
    stall_after: 90m
    advice: ["Check the eval set."]
signals:
  - id: my_retry
    match: 'retrying request'
    advice: ["The reward server is flaky."]
progress:
  - id: my_batches
    match: 'batch (?P<n>\\d+)/\\d+'
    counter: n
noise:
  - id: my_heartbeat
    match: 'still alive'
finish:
  - id: my_done
    match: 'ALL DONE'
"""


# --- list -----------------------------------------------------------------------------------


def test_list_names_every_builtin_pack_with_its_rule_counts():
    status, out, _ = rules("list")
    assert status == 0
    assert out.splitlines()[0].split()[:8] == ["PACK", "PHASES", "SIGNALS", "NOISE", "PROGRESS",
                                              "FINISH", "DIAGNOSES", "SOURCE"]
    names = {line.split()[0] for line in out.splitlines()[1:]}
    assert {"ray", "torch-distributed", "verl-gkd", "vllm", "python"} <= names


def test_list_json_includes_user_packs_with_their_file(tmp_path: Path):
    mine = write(tmp_path / "mine.yaml", MY_PACK)
    status, out, _ = rules("list", "--rules", str(mine), "--json")
    assert status == 0
    packs = {p["pack"]: p for p in json.loads(out)["packs"]}
    assert packs["mytrainer"]["source"] == str(mine)
    assert (packs["mytrainer"]["phases"], packs["mytrainer"]["noise"]) == (1, 1)
    assert packs["ray"]["source"] == "built-in" and packs["ray"]["phases"] >= 1


# --- show -----------------------------------------------------------------------------------


def test_show_includes_the_rules_of_extended_packs_and_applies_overrides():
    status, out, _ = rules("show", "verl-gkd", "--json")
    assert status == 0
    doc = json.loads(out)
    phases = {p["id"]: p for p in doc["phases"]}
    assert phases["data_load"]["origin"]["pack"] == "hf-datasets"  # inherited
    assert phases["dist_init"]["origin"]["pack"] == "torch-distributed"
    # verl's own training loop sits beside the generic one it inherits
    assert phases["train_loop"]["origin"]["pack"] == "torch-distributed"
    assert phases["gkd_train_loop"]["origin"]["pack"] == "verl-gkd"
    assert "step:" in phases["gkd_train_loop"]["start"]
    assert [p["id"] for p in doc["phases"]].count("train_loop") == 1


def test_show_reflects_a_user_override(tmp_path: Path):
    mine = write(tmp_path / "mine.yaml",
                 "pack: mine\nphases:\n  - id: weight_sync\n    start: 'MY SYNC BEGIN'\n")
    _, out, _ = rules("show", "verl-gkd", "--rules", str(mine), "--json")
    sync = next(p for p in json.loads(out)["phases"] if p["id"] == "weight_sync")
    assert sync["start"] == "MY SYNC BEGIN"
    assert sync["origin"] == {"pack": "mine", "file": str(mine), "line": 3}


def test_show_yaml_is_a_valid_pack_with_the_same_rules(tmp_path: Path):
    status, text, _ = rules("show", "ray")
    assert status == 0
    assert "# from ray (" in text
    pack = load_pack_text(text, "shown.yaml")
    _, data, _ = rules("show", "ray", "--json")
    doc = json.loads(data)
    assert pack.name == "ray"
    for kind in ("phases", "signals", "noise", "progress", "finish"):
        assert [r.id for r in getattr(pack, kind)] == [r["id"] for r in doc[kind]]
    init = next(p for p in pack.phases if p.id == "ray_init")
    assert init.stall_after == 300


def test_show_of_an_unknown_pack_is_a_usage_error():
    status, _, err = rules("show", "no-such-pack")
    assert status == 2
    assert "no pack named 'no-such-pack'" in err and "verl-gkd" in err


# --- lint -----------------------------------------------------------------------------------


def test_lint_of_a_valid_pack_exits_0_with_a_summary(tmp_path: Path):
    mine = write(tmp_path / "mine.yaml", MY_PACK)
    status, out, _ = rules("lint", str(mine))
    assert status == 0
    assert out.strip() == (f"ok: {mine}: pack mytrainer (1 phase, 1 signal, 1 noise, "
                           f"1 progress, 1 finish)")


def test_lint_reports_each_problem_with_file_line_and_rule_and_exits_2(tmp_path: Path):
    bad = write(tmp_path / "bad.yaml", """\
pack: bad
phases:
  - id: warmup
    start: '.*WARMUP begin'
signals:
  - id: every_line
    match: 'oops|'
    advice: ["x"]
  - id: dist_init
    match: 'collides with a phase of torch-distributed'
    advice: ["x"]
""")
    status, out, _ = rules("lint", str(bad))
    assert status == 2
    assert f"{bad}:6: rule every_line: `match` matches an empty line" in out
    assert f"{bad}:9: rule dist_init: duplicate id 'dist_init': also a phases rule in pack " \
           "torch-distributed" in out
    assert f"{bad}:3: rule warmup: warning: `start` starts with `.*`" in out
    assert f"{bad}:3: rule warmup: warning: phase has no advice" in out
    assert out.rstrip().endswith("2 error(s)")


def test_lint_reports_a_bad_regex_with_its_place(tmp_path: Path):
    bad = write(tmp_path / "bad.yaml", "pack: bad\nnoise:\n  - id: n\n    match: '(unclosed'\n")
    status, out, _ = rules("lint", str(bad), "--json")
    assert status == 2
    doc = json.loads(out)
    assert doc["ok"] is False
    [error] = doc["errors"]
    assert (error["file"], error["line"], error["rule"]) == (str(bad), 4, "n")
    assert "bad regex in `match`" in error["message"]


def test_lint_notes_a_rule_that_replaces_a_builtin_one(tmp_path: Path):
    mine = write(tmp_path / "mine.yaml", "pack: mine\nphases:\n  - id: weight_sync\n"
                 "    start: 'MY SYNC'\n    advice: ['look at my sync']\n")
    status, out, _ = rules("lint", str(mine))
    assert status == 0
    assert f"{mine}:3: rule weight_sync: note: replaces the built-in rule of pack verl-gkd" in out


def test_lint_of_the_builtin_rules_folder_is_clean():
    status, out, _ = rules("lint", str(builtin_rules_dir()))
    assert status == 0
    assert all(line.startswith("ok: ") for line in out.splitlines()), out


def test_lint_of_a_missing_file_is_an_error(tmp_path: Path):
    status, out, _ = rules("lint", str(tmp_path / "nope.yaml"))
    assert status == 2
    assert "no such rule file or folder" in out


# --- test -----------------------------------------------------------------------------------


LOG = [
    "booting my trainer",                       # 1 plain
    "[EVAL] begin",                             # 2 phase start
    "batch 1/10",                               # 3 counter grew
    "batch 1/10",                               # 4 same count: not progress
    "still alive",                              # 5 noise
    "retrying request to reward server",        # 6 signal
    "batch 2/10",                               # 7 counter grew
    "Waiting for 3 workers... (elapsed: 600s)",  # 8 a built-in noise line
    "[EVAL] end",                               # 9 phase done
]


def run_test(tmp_path: Path, lines: list[str], *extra: str) -> tuple[int, dict]:
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")
    mine = write(tmp_path / "mine.yaml", MY_PACK)
    status, out, _ = rules("test", str(log), "--rules", str(mine), "--json",
                           *(extra or ("--show", "matched")))
    return status, json.loads(out)


def test_rules_test_says_which_rule_hit_each_line_and_whether_it_was_progress(tmp_path: Path):
    status, doc = run_test(tmp_path, LOG)
    assert status == 0
    by_line = {r["line"]: r for r in doc["lines"]}
    assert 1 not in by_line  # plain lines are only counted
    assert by_line[2]["hits"] == [{"kind": "phase-start", "rule": "my_eval", "pack": "mytrainer",
                                   "detail": "started"}]
    assert by_line[3]["progress"] and by_line[3]["hits"][0]["detail"] == "n=1 grew"
    assert not by_line[4]["progress"] and by_line[4]["hits"][0]["detail"] == "n=1 did not grow"
    assert not by_line[5]["progress"] and by_line[5]["hits"][0]["kind"] == "noise"
    assert not by_line[6]["progress"] and by_line[6]["hits"][0]["rule"] == "my_retry"
    assert by_line[7]["progress"]
    assert by_line[8]["hits"][0] == {"kind": "noise", "rule": "waiting_for_workers",
                                     "pack": "ray", "detail": "output, not progress"}
    assert by_line[9]["hits"][0]["detail"] == "completed"


def test_rules_test_summary_counts_hits_never_hit_rules_and_unmatched_lines(tmp_path: Path):
    _, doc = run_test(tmp_path, [*LOG, "another plain line", "booting my trainer"])
    summary = doc["summary"]
    assert summary["lines"] == len(LOG) + 2
    hits = {(h["kind"], h["rule"]): h["count"] for h in summary["hits"]}
    assert hits[("progress", "my_batches")] == 3
    # with --rules, the rules never hit are those of the user's own packs
    assert summary["never_hit_scope"] == ["mytrainer"]
    assert summary["never_hit"] == [{"kind": "finish", "rule": "my_done", "pack": "mytrainer"}]
    assert summary["unmatched"] == {"count": 3,
                                    "examples": ["booting my trainer", "another plain line"]}
    assert summary["end"] == {"phase": None, "last_completed": "my_eval", "finished": False}


def test_rules_test_reads_tqdm_redraws_as_separate_lines(tmp_path: Path):
    log = tmp_path / "bar.log"
    log.write_bytes(b"Map:  10%|#         | 10/100 [00:01<00:09, 10.0 examples/s]\r"
                    b"Map:  20%|##        | 20/100 [00:02<00:08, 10.0 examples/s]\n")
    status, out, _ = rules("test", str(log), "--json", "--show", "matched")
    assert status == 0
    doc = json.loads(out)
    assert [r["line"] for r in doc["lines"]] == [1, 2]
    assert [r["hits"][0]["rule"] for r in doc["lines"]] == ["hf_examples_progress"] * 2


def test_rules_test_plain_output_explains_lines_then_summarises(tmp_path: Path):
    log = tmp_path / "train.log"
    log.write_text("\n".join(LOG) + "\n")
    mine = write(tmp_path / "mine.yaml", MY_PACK)
    status, out, _ = rules("test", str(log), "--rules", str(mine), "--show", "matched")
    assert status == 0
    assert "      4 quiet    | batch 1/10" in out
    assert "progress     my_batches (mytrainer): n=1 did not grow" in out
    assert "rules never hit (packs mytrainer):" in out
    assert "lines that matched no rule: 1" in out
    assert out.rstrip().endswith("at the end: phase none, last completed my_eval, finished: no")


def test_rules_test_of_a_missing_log_is_a_usage_error(tmp_path: Path):
    status, _, err = rules("test", str(tmp_path / "nope.log"))
    assert status == 2 and "no such log file" in err


def test_rules_test_shows_only_the_summary_unless_asked(tmp_path: Path):
    log = tmp_path / "train.log"
    log.write_text("\n".join(LOG) + "\n")
    status, out, _ = rules("test", str(log))
    assert status == 0
    assert "quiet    | batch 1/10" not in out and "each line explained with --show" in out
    _, doc = run_test(tmp_path, LOG, "--show", "")
    assert doc["lines"] == [] and doc["summary"]["lines"] == len(LOG)


def test_rules_test_show_takes_unmatched_lines_and_line_ranges(tmp_path: Path):
    _, doc = run_test(tmp_path, LOG, "--show", "unmatched,4-5,9-")
    shown = {r["line"]: r for r in doc["lines"]}
    assert sorted(shown) == [1, 4, 5, 9]
    assert shown[1] == {"line": 1, "text": "booting my trainer", "progress": True, "hits": []}
    assert shown[4]["hits"][0]["detail"] == "n=1 did not grow"  # 3 was read, not shown
    assert shown[9]["hits"][0]["detail"] == "completed"


def test_rules_test_show_rejects_what_it_does_not_know(tmp_path: Path):
    log = write(tmp_path / "train.log", "x\n")
    for bad in ("sideways", "0", "3-x"):
        status, _, err = rules("test", str(log), "--show", bad)
        assert status == 2 and "--show:" in err


def _mixed_log(path: Path) -> Path:
    """The benchmark's generated logs (NCCL spew, vLLM, tqdm, steps, phase markers) with
    lines outside ASCII and ones a user pack hits."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import loggen

    loggen.generate(path, 16 << 10, mix="nccl-info")
    with path.open("ab") as fh:
        fh.write("batch 3/10 — étape\nstill alive ✓\n[EVAL] begin\nretrying request\n".encode())
        fh.write(path.read_bytes()[: 8 << 10].rsplit(b"\n", 1)[0] + b"\n")
    loggen.generate(path.with_suffix(".dense"), 12 << 10, mix="dense")
    with path.open("ab") as fh:
        fh.write(path.with_suffix(".dense").read_bytes())
    return path


def test_rules_test_with_the_block_matcher_says_what_line_by_line_matching_says(
        tmp_path: Path, monkeypatch):
    import pytest

    pytest.importorskip("hyperscan")
    from hangwatch.commands import rules as rules_command
    from hangwatch.packs.load import load_rule_set

    log = _mixed_log(tmp_path / "mixed.log")
    mine = write(tmp_path / "mine.yaml", MY_PACK)
    rule_set = load_rule_set([str(mine)])

    def explain(tester: rules_command.RuleTester) -> tuple[list, dict]:
        shown = [r for block in rules_command.read_blocks(log) for r in tester.feed_block(block)]
        return [vars(r) for r in shown], tester.summary()

    fast = rules_command.RuleTester(rule_set, rules_command.parse_show("all"))
    assert fast.prefilter is not None
    summary_only = rules_command.RuleTester(rule_set)
    monkeypatch.setattr("hangwatch.core.prefilter.build_prefilter", lambda *a, **k: None)
    simple = rules_command.RuleTester(rule_set, rules_command.parse_show("all"))
    assert simple.prefilter is None
    lines, summary = explain(fast)
    assert (lines, summary) == explain(simple)
    assert explain(summary_only) == ([], summary)
    hits = {h["kind"] for h in summary["hits"]}
    assert {"noise", "progress", "phase-start", "signal"} <= hits


# --- stacks: -----------------------------------------------------------------------------------


def test_show_lists_the_stacks_rules_with_their_place_and_the_yaml_loads_back(tmp_path: Path):
    mine = write(tmp_path / "mine.yaml", "pack: mine\nstacks:\n  - id: my_loader\n"
                                         "    match: '^fetch_shard \\('\n    phase: data_load\n"
                                         "    label: reading a shard\n")
    status, text, _ = rules("show", "mine", "--rules", str(mine))
    assert status == 0
    assert f"# from mine ({mine}:3)" in text
    pack = load_pack_text(text, "shown.yaml")
    assert [(r.id, r.pattern, r.phase, r.label) for r in pack.stack_rules] == [
        ("my_loader", "^fetch_shard \\(", "data_load", "reading a shard")]
    _, data, _ = rules("show", "generic", "--json")
    collective = next(r for r in json.loads(data)["stacks"] if r["id"] == "torch_collective")
    assert collective["phase"] == "collective" and collective["origin"]["pack"] == "generic"
    assert collective["origin"]["file"].endswith("generic.yaml")
    assert collective["origin"]["line"] > 0


def test_lint_refuses_a_stacks_pattern_that_hits_every_frame(tmp_path: Path):
    mine = write(tmp_path / "mine.yaml", "pack: mine\nstacks:\n  - id: any\n"
                                         "    match: 'x?'\n    label: anything\n")
    status, out, _ = rules("lint", str(mine))
    assert status == 2
    assert f"{mine}:3: rule any: `match` matches an empty frame" in out


def test_lint_counts_stacks_rules():
    status, out, _ = rules("lint", str(builtin_rules_dir() / "generic.yaml"))
    assert status == 0
    assert "stacks)" in out
