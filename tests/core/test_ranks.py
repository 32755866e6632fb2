"""Which rank holds the job up: the engine fed per-rank files and merged logs, with and
without the prefilter, on a fake clock."""

from __future__ import annotations

import functools
import time
from pathlib import Path

import pytest
import regex

from hangwatch.core import ranks
from hangwatch.core.clock import FakeClock
from hangwatch.core.engine import Engine
from hangwatch.core.prefilter import build_prefilter
from hangwatch.core.ranks import rank_from_path, span
from hangwatch.core.rules import RuleSet
from hangwatch.errors import ConfigErrors
from hangwatch.packs.load import load_pack_text, load_rule_set

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ranks"


@functools.cache
def builtin_rules() -> RuleSet:
    return load_rule_set()


def make(prefilter: bool, rules: RuleSet | None = None) -> tuple[Engine, FakeClock]:
    rules = rules or builtin_rules()
    clock = FakeClock()
    pre = build_prefilter(rules) if prefilter else None
    if prefilter and pre is None:
        pytest.skip("hyperscan is not installed")
    return Engine(rules, default_stall=600.0, clock=clock, prefilter=pre), clock


def block(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode()


def rank_log(rank: int, steps: int, world: int = 4) -> list[str]:
    return [f"[rank{rank}] calling init_process_group(backend=gloo, world_size={world})",
            "process group initialized",
            *(f"step {s} loss {1.0 / s:.4f}" for s in range(1, steps + 1))]


MODES = pytest.mark.parametrize("prefilter", [True, False], ids=["prefilter", "line-by-line"])


@MODES
def test_separate_rank_files_name_the_rank_whose_step_is_behind(prefilter):
    engine, clock = make(prefilter)
    for rank in range(4):
        engine.feed_block(f"logs/rank{rank}.log", block(rank_log(rank, 5 if rank == 2 else 8)))
    clock.advance(700)
    stall = engine.tick()[0]
    [lag] = stall.laggards
    assert (lag.rank, lag.source, lag.counter, lag.phase) == (2, "logs/rank2.log", 5,
                                                              "train_loop")
    assert lag.why == "at step 5 while ranks 0,1,3 reached step 8"
    assert stall.rank_summary.startswith("held up by rank 2: at step 5")
    assert [row.counter for row in stall.ranks] == [8, 8, 5, 8]


@MODES
def test_separate_rank_files_all_equal_are_stuck_as_a_whole(prefilter):
    engine, _ = make(prefilter)
    for rank in range(4):
        engine.feed_block(f"rank{rank}.log", block(rank_log(rank, 8)))
    stall = engine.diagnosis()
    assert stall.laggards == ()
    assert stall.rank_summary == ("no rank stands out among 4 ranks (step 8, in train_loop): "
                                  "the job is stuck as a whole")


@MODES
def test_a_rank_missing_from_the_world_is_named(prefilter):
    engine, _ = make(prefilter)
    for rank in (0, 1, 3):
        engine.feed_block(f"rank{rank}.log", block(rank_log(rank, 8)))
    [lag] = engine.diagnosis().laggards
    assert (lag.rank, lag.source, lag.phase) == (2, None, None)
    assert lag.why == "never logged (world size 4: world_size=4)"


def test_rank_zero_alone_logging_names_no_missing_rank():
    engine, _ = make(True)
    engine.feed_block("train.log", block(rank_log(0, 8)))
    stall = engine.diagnosis()
    assert stall.laggards == ()
    assert stall.rank_summary.startswith("world size 4, but only rank 0 logged")


def test_a_rank_that_went_silent_first_is_named_by_its_files_last_write():
    engine, clock = make(True)
    for rank in range(3):
        engine.feed_block(f"rank{rank}.log", block(rank_log(rank, 8, world=3)))
    clock.advance(5)
    for rank, quiet in ((0, 30.0), (1, 40.0), (2, 1200.0)):
        engine.ranks.backdate(f"rank{rank}.log", quiet)
    [lag] = engine.diagnosis().laggards
    assert lag.rank == 2
    assert lag.why == "silent for 20m00s; the others made progress until 30s ago"


@MODES
def test_a_rank_that_never_reached_the_phase_the_others_reached_is_named(prefilter):
    engine, _ = make(prefilter)
    lines = []
    for rank in range(4):
        lines.append(f"[rank{rank}]: calling init_process_group(backend=nccl, world_size=4)")
    lines += [f"[rank{rank}]: Starting training loop" for rank in (0, 1, 3)]
    engine.feed_block("train.log", block(lines))
    [lag] = engine.diagnosis().laggards
    assert lag.rank == 2 and lag.phase == "dist_init"
    assert lag.why == "never reached train_loop (ranks 0,1,3 did); still in dist_init"


def merged(prefix: str, stops: dict[int, int], steps: int = 300) -> bytes:
    """One block of a merged log: every rank prints each step, interleaved; a rank in
    `stops` stops after that step (at 0, it never logs)."""
    lines = [f"{prefix.format(r=r)}calling init_process_group(backend=gloo, world_size=4)"
             for r in range(4) if stops.get(r) != 0]
    lines.append("launcher: all ranks started")  # no prefix: the launcher's own line
    for step in range(1, steps + 1):
        for rank in range(4):
            if step <= stops.get(rank, steps):
                lines.append(f"{prefix.format(r=rank)}step {step} loss 0.5000")
                lines.append(f"{prefix.format(r=rank)}fetched batch of 64 samples")
    return block(lines)


@MODES
@pytest.mark.parametrize("prefix", ["[rank{r}]:", "[default{r}]:", "{r}: ", "[Rank {r}] "])
def test_merged_log_names_the_rank_behind_whatever_its_prefix(prefilter, prefix):
    engine, _ = make(prefilter)
    engine.feed_block("train.log", merged(prefix, {2: 200}))
    stall = engine.diagnosis()
    assert [(lag.rank, lag.counter) for lag in stall.laggards] == [(2, 200)]
    assert stall.laggards[0].why == "at step 200 while ranks 0,1,3 reached step 300"
    assert [row.rank for row in stall.ranks] == [0, 1, 2, 3]  # the launcher is no rank


@MODES
def test_merged_log_all_equal_and_a_missing_rank(prefilter):
    engine, _ = make(prefilter)
    engine.feed_block("train.log", merged("[rank{r}]:", {}))
    stall = engine.diagnosis()
    assert stall.laggards == ()
    assert "stuck as a whole" in stall.rank_summary
    engine, _ = make(prefilter)
    engine.feed_block("train.log", merged("[rank{r}]:", {1: 0}))
    assert [(lag.rank, lag.why) for lag in engine.diagnosis().laggards] == [
        (1, "never logged (world size 4: world_size=4)")]


@MODES
def test_one_nodes_share_of_the_world_names_no_missing_rank(prefilter):
    # the log of the second of two nodes: ranks 4-7 of 8; ranks 0-3 write on node one
    lines = [f"[rank{r}]: calling init_process_group(backend=nccl, world_size=8)"
             for r in range(4, 8)]
    lines += [f"[rank{r}]: step {s} loss 0.5000" for s in range(1, 20) for r in range(4, 8)]
    engine, _ = make(prefilter)
    engine.feed_block("node1.log", block(lines))
    stall = engine.diagnosis()
    assert stall.laggards == ()
    assert stall.rank_summary.endswith("ranks 4-7 of world size 8 logged here, one node's "
                                       "share: the others log on their own nodes")
    # ranks 4-6 alone are no node's share (8 is not a multiple of 3): rank 7 and the rest
    engine, _ = make(prefilter)
    engine.feed_block("node1.log", block([x for x in lines if not x.startswith("[rank7]")]))
    assert [lag.rank for lag in engine.diagnosis().laggards][:2] == [0, 1]


def test_merged_log_read_live_line_by_line_tracks_each_rank():
    engine, clock = make(True)
    data = merged("[rank{r}]:", {3: 40}, steps=60).splitlines(keepends=True)
    for raw in data:
        engine.feed_block("train.log", raw)
        clock.advance(0.5)
    rows = {row.rank: row for row in engine.diagnosis().ranks}
    assert rows[3].counter == 40 and rows[0].counter == 60
    assert rows[3].idle_s is not None and rows[0].idle_s is not None
    assert rows[3].idle_s > rows[0].idle_s
    assert rows[3].last_line == "[rank3]:fetched batch of 64 samples"


def test_ray_actors_are_told_apart_by_pid_and_ip():
    engine, _ = make(True)
    lines = []
    for step in range(1, 30):
        for pid, ip in ((101, "10.0.0.1"), (101, "10.0.0.2"), (102, "10.0.0.1")):
            if not (pid == 102 and step > 12):
                lines.append(f"(WorkerDict pid={pid}, ip={ip}) step {step} loss 0.25")
    engine.feed_block("ray.log", block(lines))
    [lag] = engine.diagnosis().laggards
    assert lag.rank == "WorkerDict pid=102, ip=10.0.0.1" and lag.counter == 12


def test_a_pack_adds_a_rank_prefix():
    pack = load_pack_text("pack: mine\nranks:\n  - id: worker\n    match: '^<w(?P<rank>\\d+)>'\n",
                          "mine.yaml")
    rules = RuleSet([*builtin_rules().packs, pack])
    engine, _ = make(True, rules)
    lines = [f"<w{r}> step {s} loss 0.1" for s in range(1, 9) for r in range(3) if s < 6 or r]
    engine.feed_block("train.log", block(lines))
    [lag] = engine.diagnosis().laggards
    assert lag.rank == 0 and lag.counter == 5


def test_a_rank_rule_without_a_rank_group_is_an_error_with_its_place():
    text = "pack: mine\nranks:\n  - id: worker\n    match: '^<w(\\d+)>'\n"
    with pytest.raises(ConfigErrors) as caught:
        load_pack_text(text, "mine.yaml")
    [error] = caught.value.errors
    assert (error.file, error.line, error.rule) == ("mine.yaml", 4, "worker")
    assert "named group `rank`" in error.message


# Real watchdog lines (tests/fixtures/ranks/README.md says where each comes from).
SAME = (FIXTURES / "watchdog_same_collective.log").read_bytes()

DIVERGED = (FIXTURES / "watchdog_rank2_diverged.log").read_bytes()


@MODES
def test_watchdog_lines_at_different_seqnums_name_the_rank_that_diverged(prefilter):
    engine, _ = make(prefilter)
    engine.feed_block("train.log", DIVERGED)
    stall = engine.diagnosis()
    assert stall.desync == ("ranks 0,1,3 in _ALLGATHER_BASE SeqNum 126; rank 2 in "
                            "_REDUCE_SCATTER_BASE SeqNum 122: rank 2 diverged")
    [lag] = stall.laggards
    assert lag.rank == 2
    assert lag.why == ("diverged: in _REDUCE_SCATTER_BASE SeqNum 122 while ranks 0,1,3 are in "
                       "_ALLGATHER_BASE SeqNum 126")


@MODES
def test_watchdog_lines_at_one_collective_name_no_rank(prefilter):
    engine, _ = make(prefilter)
    engine.feed_block("train.log", SAME)
    stall = engine.diagnosis()
    assert stall.desync == ("ranks 0-2 in ALLREDUCE SeqNum 808 (last completed 807): "
                            "all at the same collective")
    assert stall.laggards == ()


def test_watchdog_summary_names_ranks_that_printed_no_watchdog_line():
    engine, _ = make(True)
    engine.feed_block("train.log", block([f"[rank{r}]: step 3 loss 0.1" for r in range(4)]))
    engine.feed_block("train.log", SAME)
    assert engine.diagnosis().desync.endswith("; no watchdog line from rank 3")


def test_a_single_log_without_ranks_says_nothing_about_ranks():
    engine, _ = make(True)
    engine.feed_block("train.log", block([f"step {s} loss 0.1" for s in range(1, 9)]))
    stall = engine.diagnosis()
    assert (stall.laggards, stall.ranks, stall.rank_summary) == ((), (), "")


@pytest.mark.parametrize(("path", "rank"), [
    ("logs/rank3.log", "3"), ("worker-12.out", "12"), ("out/proc_0.txt", "0"),
    ("run/attempt_0/5/stdout.log", "5"), ("train.log", None), ("frank3.log", None),
    ("logs/2024-01-01.log", None)])
def test_rank_from_the_file_name_only_where_it_is_clear(path, rank):
    assert rank_from_path(path) == rank


def test_rank_lists_are_written_as_ranges():
    assert span(["0", "1", "2", "3", "5", "7", "8"]) == "0-3,5,7,8"
    assert span(["3", "1"]) == "1,3"
    # named ranks after the numbered ones, apart: a Ray label holds a comma itself
    assert span(["1", "WorkerDict pid=3001, ip=10.0.0.1", "0", "TaskRunner pid=4"]) == \
        "0,1; TaskRunner pid=4; WorkerDict pid=3001, ip=10.0.0.1"


def test_ever_new_actors_are_no_rank_set_said_once_and_memory_stays_flat():
    from hangwatch.core.ranks import MAX_ACTORS

    engine, _ = make(True)
    engine.feed_block("ray.log", block([f"(WorkerDict pid={pid}) loaded shard"
                                        for pid in range(MAX_ACTORS + 5000)]))
    assert len(engine.ranks.members) == 0
    stall = engine.diagnosis()
    assert (stall.laggards, stall.laggards_more, stall.ranks) == ((), 0, ())
    assert stall.rank_summary == (
        f"not judged: ray.log names more than {MAX_ACTORS} processes by its prefixes (such "
        f"as WorkerDict pid={MAX_ACTORS}); they come and go (restarted workers, or a process "
        "per task) and are no set of ranks")


def test_a_few_actors_restarted_now_and_then_are_still_ranks():
    engine, _ = make(True)
    engine.feed_block("ray.log", block([f"(WorkerDict pid={pid}) step:{8 if pid != 3 else 5} "
                                        "- loss 0.5" for pid in range(200)]))
    stall = engine.diagnosis()
    assert [lag.rank for lag in stall.laggards] == ["WorkerDict pid=3"]


@MODES
def test_many_laggards_name_a_few_and_count_the_rest(prefilter):
    engine, _ = make(prefilter)
    engine.feed_block("train.log", block([f"[rank{r}]: step {5 if r % 5 == 0 else 8} loss 0.5"
                                          for r in range(100)]))
    stall = engine.diagnosis()
    assert [lag.rank for lag in stall.laggards] == [0, 5, 10, 15, 20, 25, 30, 35]
    assert stall.laggards_more == 12
    assert stall.rank_summary.endswith("(and 17 more)")


def stamped(second: int, text: str) -> str:
    return f"2026-01-11 12:{second // 60:02d}:{second % 60:02d},000 {text}"


@MODES
def test_the_rank_that_went_quiet_first_is_named_by_its_lines_timestamps(prefilter):
    """All ranks reach step 8; rank 2 stops at 12:03:04, the others print plain lines until
    12:03:07, then nothing: read after the fact, only the timestamps tell."""
    engine, clock = make(prefilter)
    for rank in range(4):
        lines = [stamped(170 + s, line) for s, line in enumerate(rank_log(rank, 8))]
        last = 184 if rank == 2 else 187
        lines += [stamped(s, f"[rank{rank}] waiting for the batch") for s in range(179, last + 1)]
        engine.feed_block(f"logs/rank{rank}.log", block(lines))
    clock.advance(700)
    stall = engine.tick()[0]
    [lag] = stall.laggards
    assert (lag.rank, lag.counter) == (2, 8)
    assert lag.why == "quiet since 12:03:04, 3s before the others"
    assert stall.rank_summary == "held up by rank 2: quiet since 12:03:04, 3s before the others"


@MODES
def test_the_rank_that_went_quiet_first_is_named_by_when_its_lines_arrived(prefilter):
    """The same job followed live, lines without timestamps, one every 0.5 s: a merged log."""
    engine, clock = make(prefilter)
    for step in range(1, 9):
        engine.feed_block("train.log", block([f"[rank{r}]: step {step} loss 0.5"
                                              for r in range(4)]))
        clock.advance(1.0)
    quiet_at = clock.wall()
    for _ in range(8):  # 4 s of plain lines from ranks 0, 1 and 3
        clock.advance(0.5)
        engine.feed_block("train.log", block([f"[rank{r}]: waiting for the batch"
                                              for r in (0, 1, 3)]))
    clock.advance(700)
    stall = engine.tick()[0]
    assert [(lag.rank, lag.why) for lag in stall.laggards] == [
        (2, f"quiet since {time.strftime('%H:%M:%S', time.gmtime(quiet_at - 1))} UTC, "
            "5s before the others")]


@MODES
def test_ranks_that_stop_one_after_another_name_no_rank(prefilter):
    """Gaps of 3 s between each rank's last line: no rank stopped clearly first."""
    engine, clock = make(prefilter)
    for rank in range(4):
        lines = [stamped(170 + s, line) for s, line in enumerate(rank_log(rank, 8))]
        lines += [stamped(s, f"[rank{rank}] waiting") for s in range(179, 182 + 3 * rank)]
        engine.feed_block(f"logs/rank{rank}.log", block(lines))
    clock.advance(700)
    stall = engine.tick()[0]
    assert stall.laggards == ()
    assert stall.rank_summary.startswith("no rank stands out among 4 ranks")


def test_rank_idle_gives_the_lowest_rank_numbers_and_the_most_idle_of_the_rest():
    engine, clock = make(True)
    engine.feed_block("train.log", block([f"[rank{r}]: step 1 loss 0.5" for r in range(6)]
                                         + ["(WorkerDict pid=7) step:1 - loss 0.5"]))
    clock.advance(30)
    engine.feed_block("train.log", block([f"[rank{r}]: step 2 loss 0.5" for r in (0, 1, 2, 4)]
                                         + ["(WorkerDict pid=7) step:2 - loss 0.5"]))
    clock.advance(5)
    shown, others = engine.ranks.rank_idle(4)
    assert shown == {"0": 5.0, "1": 5.0, "2": 5.0, "3": 35.0}
    assert others == 35.0  # rank 5; the actor (pid=7) is among the others, at 5 s
    assert engine.ranks.rank_idle(64) == ({str(r): 35.0 if r in (3, 5) else 5.0
                                           for r in range(6)}, 5.0)


def test_a_lines_rank_label_is_the_one_its_prefix_search_gives_also_when_kept():
    """A Ray prefix's label is kept by the prefix (up to its first `)`): every line, read
    twice, gets the label the search gives it the first time."""
    patterns = [*ranks.BUILTIN_PREFIXES, *(r.match for r in load_rule_set().ranks)]
    prefixes = ranks._Prefixes(patterns)
    root = Path(__file__).resolve().parents[1]
    lines = [line for log in sorted(root.rglob("*.log"))
             for line in log.read_text(errors="replace").splitlines()]
    lines += ["(WorkerDict pid=31, ip=1.2.3.4) [rank0]", "(WorkerDict pid=31, ip=1.2.3.4) x",
              "(pid=07) y", "(venv) [rank2] z", "(pid=x) [rank 4]", "(Actor pid=7)", "(",
              "(a pid=1)(b pid=2)", " (pid=3) w", "(pid=5, ip=::1) [rank 6]"]
    assert any(line.startswith("(") for line in lines[:-10])
    for line in lines + lines:
        found = prefixes.search(line[:256])
        label = found.group("rank").strip() if found else None
        if label is not None and label.isdigit():
            label = str(int(label))
        assert prefixes.label(line[:256]) == label, line


def test_rank_prefixes_and_world_size_are_found_as_one_alternation_finds_them():
    """The prefixes are searched one by one (leftmost wins, first on a tie) and the world
    size only in lines holding one of its words: the same matches as the one regex each."""
    patterns = [*ranks.BUILTIN_PREFIXES, *(r.match for r in load_rule_set().ranks)]
    one = regex.compile("|".join(f"(?:{p})" for p in patterns), regex.MULTILINE)
    apart = ranks._Prefixes(patterns)
    root = Path(__file__).resolve().parents[1]
    lines = [line for log in sorted(root.rglob("*.log"))
             for line in log.read_text(errors="replace").splitlines()]
    lines += ["[rank3] at world_size=4", "  12: [rank1] x", "12/16 clients joined",
              "a MEMBER: 3/8", "x_world_size=3 then world_size: 5", "[default2]: [rank 1]",
              "tasks that reached the barrier: 3/4", "(WorkerDict pid=31, ip=1.2.3.4) [rank0]"]
    assert len(lines) > 2000
    for line in lines:
        a, b = one.search(line[:256]), apart.search(line[:256])
        assert (a and (a.span(), a.group("rank"))) == (b and (b.span(), b.group("rank"))), line
        start = ranks._world_start(line)
        found = None if start is None else ranks._WORLD.search(line, start)
        expected = ranks._WORLD.search(line)
        assert (expected and expected.groupdict()) == (found and found.groupdict()), line
