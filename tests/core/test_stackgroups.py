"""Grouping on py-spy dumps recorded from real processes (tests/fixtures/stacks/record.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangwatch.core.members import Member
from hangwatch.core.stackgroups import Place, group, place_of
from hangwatch.core.stacktext import Frame, logged_stacks, normalise, parse_dump
from hangwatch.packs.load import load_rule_set

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "stacks"


@pytest.fixture(scope="module")
def rules():
    return load_rule_set().stack_rules


def place(rules, name: str) -> Place:
    found = place_of(parse_dump((FIXTURES / name).read_text()), rules)
    assert found is not None
    return found


def ranks(rules, scenario: str, world: int = 4) -> tuple[list[Member], dict[int, Place]]:
    members = [Member(1000 + r, r, "rank", f"rank {r}", True) for r in range(world)]
    return members, {1000 + r: place(rules, f"{scenario}/rank{r}.txt") for r in range(world)}


def test_dump_parsing_drops_lines_addresses_and_the_header():
    [thread] = parse_dump((FIXTURES / "data" / "rank0-native.txt").read_text())
    assert thread.name == "MainThread" and thread.tid > 0 and not thread.active
    texts = [f.text for f in thread.frames]
    assert "all_reduce (torch/distributed/distributed_c10d.py)" in texts
    assert not any("0x7f" in t or ":3252" in t for t in texts)  # addresses, line numbers
    # C++ template and parameter lists go: frames from one template read the same.
    assert "pybind11::cpp_function::dispatcher (libtorch_python.so)" in texts
    assert not any("<" in t and "libtorch_python" in t for t in texts)


def test_absolute_paths_lose_their_folders():
    lib = "/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
    assert normalise("barrier", lib).text == "barrier (torch/distributed/distributed_c10d.py)"
    assert normalise("main", "/home/alice/job/train.py").text == "main (train.py)"
    assert normalise("0x7f00aa", "libc.so.6") is None


def test_rank_in_data_loading_is_named_while_the_others_wait_in_all_reduce(rules):
    result = group(*ranks(rules, "data"))
    [suspect] = result.suspects
    assert (suspect.pid, suspect.rank, suspect.phase) == (1002, 2, "data_load")
    assert suspect.where == "SilentShard.__getitem__ (ranks.py)"
    assert suspect.why == ("rank 2 is in `SilentShard.__getitem__` (data loading) while "
                           "ranks 0,1,3 wait in `all_reduce` (collective)")
    majority = result.groups[0]
    assert majority.where == "all_reduce (torch/distributed/distributed_c10d.py)"
    assert (majority.ranks, majority.count, majority.phase) == ((0, 1, 3), 3, "collective")


def test_rank_0_saving_while_the_others_wait_in_the_barrier(rules):
    result = group(*ranks(rules, "save"))
    [suspect] = result.suspects
    assert (suspect.rank, suspect.phase) == (0, "checkpoint_save")
    assert suspect.where == "save (torch/serialization.py)"
    assert "ranks 1-3 wait in `barrier` (collective)" in suspect.why


def test_ranks_that_agree_have_no_suspect_and_are_stuck_as_a_whole(rules):
    members, places = ranks(rules, "save")
    three = [m for m in members if m.rank != 0]
    result = group(three, places)
    assert result.suspects == ()
    assert len(result.groups) == 1 and result.groups[0].count == 3
    assert result.summary == "ranks 1-3 stuck as a whole in `barrier` (collective)"


def test_native_and_python_dumps_of_a_collective_land_in_the_same_place(rules):
    assert place(rules, "data/rank0-native.txt").key == place(rules, "data/rank0.txt").key


def test_deadlocked_dataloader_worker_is_the_odd_one_among_the_workers(rules):
    workers = [Member(2000 + i, None, "child of a rank", f"pid {2000 + i} (child of rank 0)",
                      True) for i in range(3)]
    rank = Member(1999, 0, "rank", "rank 0", True)
    places = {2000 + i: place(rules, f"workers/rank0-worker{i}.txt") for i in range(3)}
    places[1999] = place(rules, "workers/rank0.txt")
    result = group([rank, *workers], places)
    [suspect] = result.suspects
    assert suspect.pid == 2000 and suspect.where == "LockedShard.__getitem__ (ranks.py)"
    assert "while pids 2001,2002 wait in `_worker_loop` (data loading)" in suspect.why
    assert places[1999].where == "_BaseDataLoaderIter.__next__ (torch/utils/data/dataloader.py)"


def test_launcher_is_grouped_but_never_a_suspect(rules):
    members, places = ranks(rules, "data")
    members.append(Member(999, None, "launcher", "pid 999 (launcher)", False))
    places[999] = place(rules, "data/agent.txt")
    result = group(members, places)
    assert [s.rank for s in result.suspects] == [2]
    assert any(g.pids == (999,) for g in result.groups)


def test_no_majority_means_no_suspect(rules):
    members, places = ranks(rules, "data")
    places[1000] = places[1001] = place(rules, "save/rank0.txt")  # 2 save, 1 reduce, 1 data
    assert group(members, places).suspects == ()


def test_two_ranks_one_in_a_collective_names_the_other(rules):
    members, places = ranks(rules, "data")
    pair = [members[1], members[2]]
    [suspect] = group(pair, places).suspects
    assert suspect.rank == 2


@pytest.mark.parametrize(("name", "where", "label"), [
    ("sleep.txt", "idle_forever (<string>)", None),
    ("sleep-native.txt", "time_sleep (libpython3.11.so.1.0)", "sleeping"),
    ("socket_recv.txt", "wait_for_reply (<string>)", None),
    ("socket_recv-native.txt", "recv (libc.so.6)", "waiting for I/O"),
])
def test_plain_waits_are_placed_at_the_program_s_own_frame_or_the_native_call(
        rules, name, where, label):
    found = place(rules, name)
    assert (found.where, found.label) == (where, label)


def test_json_carries_the_issue_s_field_names(rules):
    data = group(*ranks(rules, "data")).to_json()
    assert set(data["stack_groups"][0]) == {"where", "frames", "pids", "ranks", "count", "phase",
                                                "key"}
    assert set(data["suspects"][0]) == {"pid", "rank", "where", "phase", "why"}
    assert data["stack_groups"][0]["frames"][0] == (
        "all_reduce (torch/distributed/distributed_c10d.py)")


# --- stacks a log holds ----------------------------------------------------------------------

def frame_texts(lines: list[str]) -> list[list[str]]:
    """Each stack printed in `lines`, as its frames' texts, innermost first."""
    return [[frame.text for _, frame in stack.frames] for stack in logged_stacks(lines)]


def test_stacks_in_a_log_are_read_innermost_first_whichever_way_they_are_printed():
    lines = [
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "/x/train.py", line 9, in <module>',
        '[rank1]:   File "/venv/lib/python3.11/site-packages/torch/distributed/'
        'distributed_c10d.py", line 3439, in barrier',
        "[rank1]: KeyboardInterrupt",
        "Current thread 0x00007f (most recent call first):",
        '  File "/usr/lib/python3.10/threading.py", line 320 in wait',
        '  File "/x/train.py", line 40 in loop',
        'Thread 4121 (idle): "MainThread"',
        "    read (safetensors/torch.py:311)",
        "    main (train.py:22)",
        "an ordinary line (with parentheses:1)",
    ]
    assert frame_texts(lines) == [
        ["barrier (torch/distributed/distributed_c10d.py)", "<module> (train.py)"],
        ["wait (threading.py)", "loop (train.py)"],
        ["read (safetensors/torch.py)", "main (train.py)"],
    ]
    assert logged_stacks(["    f (x.py:3)", "plain"]) == []  # one such line is no stack
    pasted = logged_stacks(["    f (x.py:3)", "    g (y.py:9)", "plain"])  # header cut off
    assert [[frame.function for _, frame in stack.frames] for stack in pasted] == [["f", "g"]]
    # the traceback (raised where the job was), faulthandler's current thread, MainThread
    assert [stack.main for stack in logged_stacks(lines)] == [True, True, True]


def test_the_source_line_under_a_traceback_frame_is_the_call_it_was_making():
    lines = [
        "[rank0]:Traceback (most recent call last):",
        '[rank0]:  File "/torchtitan/torchtitan/trainer.py", line 998, in train',
        "[rank0]:    self.checkpointer.save(",
        "[rank0]:    ~~~~~~~~~~~~~~~~~~~~~~^",
    ]
    assert frame_texts(lines) == [["checkpointer.save (call: self.checkpointer.save()",
                                   "train (torchtitan/trainer.py)"]]
    # each frame's line is the call into the frame inside it, arguments and all
    ray = ['  File "/opt/nemo_rl/algorithms/grpo.py", line 452, in setup',
           "    ray.get(helper_pg.ready(), timeout=1000)",
           '  File "/opt/venv/lib/python3.12/site-packages/ray/_private/worker.py", line 2882, '
           "in get",
           "KeyboardInterrupt"]
    assert frame_texts(["Traceback (most recent call last):", *ray]) == [[
        "get (ray/_private/worker.py)", "ray.get (call: ray.get(helper_pg.ready(), timeout=1000))",
        "setup (grpo.py)"]]
    # no source line: the exception's own line, or a faulthandler dump's next frame
    assert frame_texts(["Traceback (most recent call last):", ray[2], "KeyboardInterrupt"]) == [
        ["get (ray/_private/worker.py)"]]
    assert frame_texts(["Current thread 0x00007f (most recent call first):",
                        '  File "/x/train.py", line 40 in loop',
                        '  File "/x/train.py", line 50 in main']) == [
        ["loop (train.py)", "main (train.py)"]]


def test_numbered_frames_of_gdb_and_sglang_are_a_stack_innermost_first():
    lines = [
        "#56 forward from /sgl-workspace/sglang/python/sglang/srt/models/deepseek_v2.py:2083",
        "#57 run_batch from /sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py:1801",
        "#58 run from /usr/lib/python3.12/multiprocessing/process.py:108",
        "(gdb) bt",
        "#0  0x00007f3a in __futex_abstimed_wait_common64 (private=0, cancel=true) at "
        "./nptl/futex-internal.c:57",
        "#1  0x00007f3b in ncclProxyService(void*) () from /usr/lib/x86_64-linux-gnu/libnccl.so.2",
        "#2  0x00007f3c in start_thread (arg=<optimized out>) at ./nptl/pthread_create.c:442",
        "#3 a numbered line that is no frame",
    ]
    assert frame_texts(lines) == [
        ["forward (sglang/srt/models/deepseek_v2.py)",
         "run_batch (sglang/srt/managers/scheduler.py)", "run (multiprocessing/process.py)"],
        ["__futex_abstimed_wait_common64 (futex-internal.c)",
         "ncclProxyService (libnccl.so.2)", "start_thread (pthread_create.c)"],
    ]


def test_a_framework_run_from_its_source_checkout_is_named_from_its_package_on():
    # as if installed: the stack rules know it, and nodes with other checkout folders agree
    assert normalise("run_batch", "/sgl-workspace/sglang/python/sglang/srt/managers/"
                     "scheduler.py") == Frame("run_batch", "sglang/srt/managers/scheduler.py")
    assert normalise("fit", "/home/u/verl/verl/trainer/ppo/ray_trainer.py") == Frame(
        "fit", "verl/trainer/ppo/ray_trainer.py")
    assert normalise("main", "/home/u/proj/train.py") == Frame("main", "train.py")
    # a path elided when pasted
    assert normalise("block_until_ready", ".../jax/_src/api.py") == Frame(
        "block_until_ready", "jax/_src/api.py")
    assert normalise("main", ".../scripts/run.py") == Frame("main", "run.py")


def test_a_helper_threads_stack_is_not_the_main_one():
    lines = [
        'Thread 4130 (idle): "pin_memory"',
        "    wait (threading.py:320)",
        'Thread 4121 (idle): "MainThread"',
        "    read (safetensors/torch.py:311)",
        "Thread 0x00007f1 (most recent call first):",
        '  File "/usr/lib/python3.10/threading.py", line 320 in wait',
    ]
    assert [stack.main for stack in logged_stacks(lines)] == [False, True, False]
