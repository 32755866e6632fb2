"""The built-in rule packs against real-looking logs of the frameworks they describe.

Each pack has log excerpts under tests/fixtures/packs/<pack>/ in the formats real jobs print
(timestamps, Ray's `(Actor pid=N)` prefixes, NCCL's `host:pid:tid [rank]` prefix, tqdm `\\r`
redraws), and expected.yaml says where `hangwatch check` must place each one. A pack's rules
must all be hit by its own excerpts and by no other framework's (a pack may hit the lines of
the packs it extends, and a rule that overrides an ancestor's rule inherits its lines).
"""

from __future__ import annotations

import functools
import io
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import regex
import yaml

from hangwatch.cli import main
from hangwatch.core.clock import FakeClock
from hangwatch.core.engine import Engine
from hangwatch.core.lines import LineSplitter
from hangwatch.core.model import KINDS, RulePack
from hangwatch.packs.load import builtin_rules_dir, load_builtin_packs, load_rule_set, rule_files
from hangwatch.packs.parse import parse_pack

FIXTURES = Path(__file__).parent / "fixtures" / "packs"
EXPECTED: dict[str, dict[str, str | None]] = yaml.safe_load(
    (FIXTURES / "expected.yaml").read_text(encoding="utf-8"))


@functools.cache
def packs() -> dict[str, RulePack]:
    return {p.name: p for p in load_builtin_packs()}


def line_packs() -> list[str]:
    """Packs with rules that match lines (not the evidence-only diagnoses pack)."""
    return sorted(n for n, p in packs().items() if any(True for _ in patterns(p)))


def patterns(pack: RulePack) -> Iterator[tuple[str, str, str]]:
    for phase in pack.phases:
        yield "phase-start", phase.id, phase.start
        if phase.done:
            yield "phase-done", phase.id, phase.done
    for kind, rules in (("signal", pack.signals), ("noise", pack.noise),
                        ("progress", pack.progress), ("finish", pack.finish)):
        for rule in rules:
            yield kind, rule.id, rule.match


def ancestors(name: str) -> set[str]:
    """The pack and every pack it extends, transitively."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(packs()[current].extends)
    return seen


def fixtures(pack: str | None = None) -> list[Path]:
    root = FIXTURES / pack if pack else FIXTURES
    return sorted(root.rglob("*.log"))


def fixture_id(path: Path) -> str:
    return path.relative_to(FIXTURES).as_posix()


@functools.cache
def lines_of(path: Path) -> tuple[str, ...]:
    """The lines as the follower delivers them: `\\r` redraws are lines of their own."""
    splitter = LineSplitter()
    data = splitter.push(path.read_bytes()) + splitter.flush()
    return tuple(line.decode("utf-8", "replace") for line in data.split(b"\n")[:-1])


@functools.cache
def compiled(pattern: str) -> regex.Pattern[str]:
    return regex.compile(pattern)


def hits(pattern: str, path: Path) -> list[str]:
    return [line for line in lines_of(path) if compiled(pattern).search(line)]


def feed(path: Path) -> Engine:
    engine = Engine(load_rule_set(), default_stall=600.0, clock=FakeClock())
    splitter = LineSplitter()
    engine.feed_block(str(path), splitter.push(path.read_bytes()) + splitter.flush())
    return engine


# --- the packs themselves ---------------------------------------------------------------------


def test_every_builtin_pack_loads_and_ids_are_unique_unless_an_extending_pack_overrides():
    rules = load_rule_set()
    assert {p.name for p in rules.packs} >= {
        "python", "hf-datasets", "ray", "torch-distributed", "jax-distributed", "vllm",
        "sglang", "lightning", "deepspeed", "megatron", "verl-gkd"}
    owners: dict[str, str] = {}
    for pack in packs().values():
        for kind in ("phases", "signals", "noise", "progress", "finish", "diagnoses"):
            for rule in getattr(pack, kind):
                first = owners.setdefault(rule.id, pack.name)
                assert first == pack.name or first in ancestors(pack.name), (
                    f"{rule.id} in {pack.name} and {first}")


def test_every_builtin_pattern_compiles_as_a_users_pack_would_be_checked():
    # A built-in pack's patterns are compiled only when a log needs them, so the checks a
    # user's pack gets at load (each item compiles, the items join) are made here.
    for path in rule_files(builtin_rules_dir()):
        parse_pack(path.read_text(), str(path), builtin=False)
    rules = load_rule_set()
    for _, compiled in rules.line_rules():
        assert compiled.pattern.pattern == compiled.source


def test_every_phase_has_advice_and_every_warning_or_error_signal_too():
    for pack in packs().values():
        for phase in pack.phases:
            assert phase.advice, f"{pack.name}: phase {phase.id} has no advice"
        for signal in pack.signals:
            assert signal.severity == "info" or signal.advice, (
                f"{pack.name}: signal {signal.id} has no advice")


def test_every_builtin_phase_is_a_kind_of_place_and_a_generic_phase_named_after_one_its_own():
    for pack in load_builtin_packs():
        for phase in pack.phases:
            assert phase.kind in KINDS, f"{pack.name}: {phase.id} declares no `kind`"
            if pack.generic and phase.id.removeprefix("generic:") in KINDS:
                assert phase.id == f"generic:{phase.kind}"


def test_pythons_own_line_heads_are_read_behind_a_launchers_rank_prefix():
    rules = load_rule_set()
    for line, signal in (("Thread 0x00007f13c65f5400 (most recent call first):",
                          "python_faulthandler_dump"),
                         ("KeyboardInterrupt", "python_keyboard_interrupt"),
                         ("MemoryError", "python_memory_error")):
        for prefix in ("", "[rank0]:", "[default3]:", "(RayTrainWorker pid=12, ip=10.0.0.2) "):
            found = rules.match(prefix + line)
            assert found is not None and signal in {s.id for s in found.signals}, prefix + line
    quoted = rules.match("see MemoryError above")  # not at the line's head
    assert quoted is None or "python_memory_error" not in {s.id for s in quoted.signals}


def test_no_pattern_matches_an_empty_line_or_starts_with_dot_star():
    for pack in packs().values():
        for kind, rule_id, pattern in patterns(pack):
            assert not compiled(pattern).search(""), f"{rule_id} {kind} matches every line"
            assert not pattern.startswith((".*", "(.*")), f"{rule_id} {kind} starts with .*"


def test_every_pack_has_fixtures_and_every_fixture_an_expected_verdict():
    for name in line_packs():
        assert fixtures(name), f"no fixture logs for pack {name}"
    assert sorted(EXPECTED) == sorted(fixture_id(p) for p in fixtures())


def test_dist_init_advice_names_the_rendezvous_variables():
    phase = load_rule_set().phase("dist_init")
    assert phase is not None
    advice = " ".join(phase.advice)
    for word in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "rank"):
        assert word in advice


# --- fixtures: coverage and isolation ---------------------------------------------------------


@pytest.mark.parametrize("name", line_packs())
def test_every_rule_of_a_pack_is_hit_by_its_own_fixtures(name: str):
    logs = fixtures(name)
    missed = [f"{kind} {rule_id}: {pattern}" for kind, rule_id, pattern in patterns(packs()[name])
              if not any(hits(pattern, log) for log in logs)]
    assert not missed, "\n".join(missed)


@pytest.mark.parametrize("path", fixtures(), ids=fixture_id)
def test_no_rule_hits_the_lines_of_another_framework(path: Path):
    own = path.relative_to(FIXTURES).parts[0]
    allowed = ancestors(own)
    inherited = {rule_id for n in allowed for _, rule_id, _ in patterns(packs()[n])}
    # The generic layer names every framework's lines by their words: that is its job.
    fights = [f"{name} {kind} {rule_id} <- {line.strip()[:120]}"
              for name in line_packs() if name not in allowed and not packs()[name].generic
              for kind, rule_id, pattern in patterns(packs()[name]) if rule_id not in inherited
              for line in hits(pattern, path)]
    assert not fights, "\n".join(fights)


# --- fixtures: where hangwatch places each log ---------------------------------------------------


@pytest.mark.parametrize("path", fixtures(), ids=fixture_id)
def test_engine_places_each_fixture_in_its_expected_phase(path: Path):
    expected = EXPECTED[fixture_id(path)]
    state = feed(path).state()
    assert (state["phase"], state["last_completed"]) == (expected["phase"],
                                                         expected["last_completed"])
    assert state["finished"] == (expected["verdict"] == "finished")


@pytest.mark.parametrize("path", fixtures(), ids=fixture_id)
def test_check_command_gives_each_fixture_its_verdict_phase_and_last_completed(
        path: Path, tmp_path: Path):
    log = tmp_path / path.name
    shutil.copy(path, log)
    hour_ago = time.time() - 3600
    os.utime(log, (hour_ago, hour_ago))  # quiet for longer than any stall threshold
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", str(log), "--json"], out, err)
    data = json.loads(out.getvalue())
    expected = EXPECTED[fixture_id(path)]
    assert (data["verdict"], data["phase"], data["last_completed"]) == (
        expected["verdict"], expected["phase"], expected["last_completed"]), err.getvalue()
    assert status == (3 if expected["verdict"] == "stalled" else 0)
    if expected["verdict"] == "stalled":
        assert data["advice"]


# --- progress that really advances --------------------------------------------------------------


def idle_after(lines: list[str], step_s: float = 60.0) -> list[float]:
    """Feed lines a minute apart; after each, how long the engine has seen no progress."""
    clock = FakeClock()
    engine = Engine(load_rule_set(), default_stall=600.0, clock=clock)
    idle = []
    for line in lines:
        clock.advance(step_s)
        engine.feed_line("log", line)
        idle.append(engine.idle())
    return idle


def test_waiting_for_workers_with_only_the_elapsed_time_ticking_is_noise():
    line = "Waiting for 3 workers... (elapsed: 600s)"
    match = load_rule_set().match(line)
    assert match is not None and match.noise is not None
    assert match.noise.id == "waiting_for_workers"
    idle = idle_after([line, "Waiting for 3 workers... (elapsed: 660s)",
                       "Waiting for 3 workers... (elapsed: 720s)"])
    assert idle == [0.0, 60.0, 120.0]  # the first such line is news; the repeats are not


def test_one_worker_fewer_to_wait_for_is_progress():
    idle = idle_after(["Waiting for 3 workers... (elapsed: 600s)",
                       "Waiting for 3 workers... (elapsed: 660s)",
                       "Waiting for 2 workers... (elapsed: 720s)"])
    assert idle == [0.0, 60.0, 0.0]


def test_engine_metrics_repeating_with_zero_throughput_are_not_progress():
    idle_line = ("INFO 01-11 18:06:20 [loggers.py:118] Engine 000: Avg prompt throughput: "
                 "0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, "
                 "Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%")
    busy_line = idle_line.replace("generation throughput: 0.0", "generation throughput: 812.5")
    idle = idle_after([idle_line, idle_line.replace("18:06:20", "18:06:30"),
                       idle_line.replace("18:06:20", "18:06:40"), busy_line])
    assert idle == [0.0, 60.0, 120.0, 0.0]


def test_a_tqdm_redraw_of_the_same_count_is_not_progress_a_higher_count_is():
    bar = "Map (num_proc=8):  45%|████▍     | {n}/98304 [00:05<00:06, 8712.40 examples/s]"
    idle = idle_after([bar.format(n=44236), bar.format(n=44236), bar.format(n=50000)])
    assert idle == [0.0, 60.0, 0.0]


def test_nccl_debug_spew_and_repeated_shm_broadcast_waits_are_not_progress():
    idle = idle_after([
        "step 7 loss 1.2",
        "gpu-node-07:140301:140455 [0] NCCL INFO Channel 00/02 :    0   1",
        "(EngineCore_0 pid=1) INFO 01-11 10:03:33 [shm_broadcast.py:466] No available shared "
        "memory broadcast block found in 60 second. This typically happens when some processes "
        "are hanging or doing some time-consuming work (e.g. compilation)."])
    assert idle == [0.0, 60.0, 120.0]


def test_lines_the_end_to_end_jobs_print_open_the_agreed_phases():
    rules = load_rule_set()
    ddp = ["Starting training loop", "[rank0] calling init_process_group(backend=gloo, "
           "world_size=2)", "[rank0] process group initialized", "step 1 loss 0.5123"]
    engine = Engine(rules, default_stall=600.0, clock=FakeClock())
    for line in ddp[:2]:
        engine.feed_line("log", line)
    assert engine.state()["phase"] == "dist_init"
    for line in ddp[2:]:
        engine.feed_line("log", line)
    assert (engine.state()["phase"], engine.state()["last_completed"]) == ("train_loop",
                                                                          "dist_init")


def test_waiting_for_a_placement_group_with_nothing_new_is_not_progress():
    wait = ("INFO placement.py:52 -- Waiting for placement group of 16 GPUs (elapsed {s}s): "
            "{n} GPUs registered with Ray, 8 available.")
    idle = idle_after(["Creating placement group with 16 GPUs (2 bundles x 8)...",
                       wait.format(s=30, n=8), wait.format(s=60, n=8), wait.format(s=90, n=16)])
    assert idle == [0.0, 0.0, 60.0, 0.0]


# --- what packs leave to the generic layer ------------------------------------------------------

DEEPSPEED_STEP = ("[2026-01-11 10:05:40,001] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, "
                  "skipped=0, lr=[1e-05], mom=[(0.9, 0.95)]")


@pytest.mark.parametrize(("line", "phase"), [
    ("[2026-01-11 09:00:08,930] [INFO] [comm.py:668:init_distributed] Initializing TorchBackend "
     "in DeepSpeed with backend nccl", "generic:distributed_init"),
    ("[2026-01-11 10:06:03,001] [INFO] [logging.py:96:log_dist] [Rank 0] [Torch] Checkpoint "
     "global_step20 is about to be saved!", "generic:checkpoint_save"),
    ("Epoch 0, global step 100: 'val_loss' reached 1.91000 (best 1.91000), saving model to "
     "'/ckpt/lightning_logs/version_0/checkpoints/epoch=0-step=100.ckpt' as top 1",
     "generic:checkpoint_save"),
])
def test_a_line_a_pack_left_to_the_generic_layer_is_named_by_it_alone(line: str, phase: str):
    match = load_rule_set().match(line)
    assert match is not None
    assert all(r.origin.generic for r in match.phase_starts)
    assert not (match.phase_dones or match.signals or match.noise or match.progress
                or match.finish)
    assert match.phase_starts[-1].id == phase  # of two generic phases, the later one names it


def test_a_deepspeed_checkpoint_save_is_a_step_of_its_training_loop_until_the_next_step():
    engine = Engine(load_rule_set(), default_stall=600.0, clock=FakeClock())
    for line in (DEEPSPEED_STEP,
                 "[2026-01-11 10:06:03,001] [INFO] [logging.py:96:log_dist] [Rank 0] [Torch] "
                 "Checkpoint global_step20 is about to be saved!"):
        engine.feed_line("log", line)
    state = engine.state()
    assert (state["phase"], state["step"]) == ("deepspeed_train", "generic:checkpoint_save")
    assert engine.threshold_from() == (1800.0, "stall_after of generic:checkpoint_save in generic")
    engine.feed_line("log", DEEPSPEED_STEP.replace("step=10", "step=30"))
    state = engine.state()
    assert (state["phase"], state["step"]) == ("deepspeed_train", None)


@pytest.mark.parametrize(("line", "kind", "rule"), [
    # NVIDIA/nccl names the call that made a communicator: torch's process groups split theirs
    ("cosmo:3704567:3705577 [0] NCCL INFO ncclCommSplit comm 0x10772970 rank 0 nranks 2 cudaDev 0 "
     "nvmlDev 0 busId 7000 parent 0x8df0a00 color 1530306504 key 0 commId 0xa421cd9c71d9bccd - "
     "Init START", "start", "nccl_comm_init"),
    ("cosmo:3704567:3705577 [0] NCCL INFO ncclCommSplit comm 0x10772970 rank 0 nranks 2 cudaDev 0 "
     "nvmlDev 0 busId 7000 parent 0x8df0a00 color 1530306504 key 0 commId 0xa421cd9c71d9bccd - "
     "Init COMPLETE", "done", "nccl_comm_init"),
    # older Ray's raylet on a task no node can run
    ("The task with ID 000000001003e4e8ec568e9152253ebe325069b7 is infeasible and cannot currently "
     "be executed. It requires {CPU,1.000000},{GPU,6.000000} for execution", "signal",
     "ray_resources_pending"),
    # vLLM's server logs each request it takes
    ("INFO 02-12 15:20:24 logger.py:37] Received request chatcmpl-5d9f00ee: prompt: '<|im_start|>"
     "system\\nYou are a helpful assistant.'", "start", "vllm_serving"),
    # ...and its engine's stats say requests are in it, running or queued
    ("INFO 04-28 22:54:32 [loggers.py:257] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg "
     "generation throughput: 5.4 tokens/s, Running: 1 reqs, Waiting: 14 reqs, GPU KV cache usage: "
     "76.5%", "start", "vllm_serving"),
    # NCCL sets up a communicator's channels before its Init COMPLETE
    ("hd03-gpu2-0012:39115:39820 [4] NCCL INFO Connected NVLS tree", "start", "nccl_comm_init"),
    ("hd03-gpu2-0012:39111:39809 [0] NCCL INFO 16 coll channels, 16 collnet channels, 16 nvls "
     "channels, 16 p2p channels, 2 p2p channels per peer", "start", "nccl_comm_init"),
    # Ray Serve adds a deployment's replicas: actors to place and start
    ("(ServeController pid=4085) INFO 2024-06-15 15:34:36,614 controller 4085 deployment_state.py"
     ":1668 - Adding 2 replicas to deployment ModelDeployment in application 'default'.", "start",
     "ray_worker_startup"),
    # verl's trainer, its dataloaders built, starts its worker groups
    ("(TaskRunner pid=75411) Total training steps: 240", "start", "verl_workers_start"),
    ("(TaskRunner pid=934945) colocated worker base class <class 'verl.single_controller.base."
     "worker.Worker'>", "start", "verl_workers_start"),
    ("(TaskRunner pid=247607) WARNING:2025-08-02 00:35:34,451:Waiting for register center actor "
     "Se3S0W_register_center to be ready. Elapsed time: 0 seconds out of 300 seconds.", "start",
     "verl_workers_start"),
    # Ray's raylet on workers that never registered; Tune's trials all pending
    ("(raylet) [2022-08-25 11:25:08,224 E 9797 3753803] (raylet) worker_pool.cc:502: Some workers "
     "of the worker process(11326) have not registered within the timeout. The process is dead, "
     "probably it crashed during start.", "signal", "ray_worker_crashed"),
    ("Trial status: 1 PENDING", "start", "ray_placement_group"),
    # a shell's report of its job killed: bash, dash, zsh
    ("./train.sh: line 60: 11880 Killed                  python3 train.py", "signal",
     "python_killed"),
    ("./train.sh:  60: 11880 killed              PYTHONPATH=`pwd`/models python3 ./main.py",
     "signal", "python_killed"),
    ("zsh: killed     python train.py", "signal", "python_killed"),
    # older NCCL connecting a communicator's rings; the network plugin it chose
    ("[1,15]<stdout>:ip-172-32-34-121:70560:71394 [7] NCCL INFO Ring 00 : 15 -> 16 [send] via "
     "NET/AWS Libfabric/0", "start", "nccl_comm_init"),
    ("INFO: Function: ofi_init Line: 686: NET/OFI Selected Provider is efa", "start",
     "nccl_comm_init"),
    # torch 2.2's torchrun banner closes
    ("[2024-02-09 08:51:23,862] torch.distributed.run: [WARNING] "
     "*****************************************", "done", "torchrun_launch"),
    # Lightning's Trainer says which devices its strategy takes
    ("GPU available: True (cuda), used: True", "start", "lightning_strategy_setup"),
    # c10d's client socket that cannot even be set up; a bar with the shell's Killed glued on
    ("[W socket.cpp:558] [c10d] The client socket cannot be initialized to connect to "
     "[localhost]:29501 (errno: 97 - Address family not supported by protocol).", "signal",
     "c10d_connect_retry"),
    ("diarization_fscore | Epoch #1 = 86.0978% (best): : 2iteration [00:05,  3.20s/iteration]"
     "Killed", "signal", "python_killed"),
    # NCCL: a channel between bus ids, the P2P check, /dev/shm too small
    ("gpu2-ru7:2142:2554 [0] NCCL INFO Ring 00 : 0[1a000] -> 1[1b000] via direct shared memory",
     "start", "nccl_comm_init"),
    ("ava-s0:537555:537626 [2] NCCL INFO Could not enable P2P between dev 2(=3d000) and dev "
     "3(=3e000)", "start", "nccl_comm_init"),
    ("gpu2-ru7:2143:2561 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No "
     "space left on device", "signal", "nccl_shm_full"),
    ("ubuntu:9621:9689 [4] misc/shmutils.cc:71 NCCL WARN Error: failed to extend "
     "/dev/shm/nccl-oA7T4J to 5967876 bytes", "signal", "nccl_shm_full"),
    ("g148:14937:69361 [0] misc/shmutils.cc:129 NCCL WARN Error while attaching to shared memory "
     "segment /dev/shm/nccl-glnlGK (size 14156128), error: No such file or directory (2)",
     "signal", "nccl_shm_full"),
    # RLlib's trainer about to make its workers; the Hub's lock where there is no flock
    ("(PPOTrainer pid=94841) 2022-01-26 11:13:32,924\tINFO trainer.py:803 -- Current log_level is "
     "WARN. For more information, set 'log_level': 'INFO' / 'DEBUG' or use the -v and -vv flags.",
     "start", "ray_worker_startup"),
    ("FileSystem does not appear to support flock. Falling back to SoftFileLock for "
     "/model_dir/.cache/huggingface/.gitignore.lock", "signal", "hf_lock_wait"),
    # vLLM's data-parallel engine core with a request in it
    ("(EngineCore_0 pid=2461251) DEBUG 04-14 08:14:10 [core.py:416] EngineCore loop active - "
     "local unfinished: True, finished: False.", "start", "vllm_serving"),
    # NCCL's trace of a failed call climbing up (old and new forms), its sockets' retries
    ("g105:26921:27058 [0] NCCL INFO init.cc:1493 -> 2", "signal", "dist_backend_error"),
    ("g105:26921:27058 [0] NCCL INFO group.cc:64 -> 2 [Async thread]", "signal",
     "dist_backend_error"),
    ("g105:26921:27058 [0] NCCL INFO init.cc:1493 (ncclCommInitRank) -> 2", "signal",
     "dist_backend_error"),
    ("g105:26923:27059 [2] NCCL INFO misc/socket.cc:505 -> 2 (Operation now in progress)",
     "signal", "nccl_socket_error"),
    ("g105:26921:27058 [0] NCCL INFO bootstrap.cc:275 -> 2", "signal", "nccl_socket_error"),
    ("pytorch-fairseq-worker-0:16:63 [0] NCCL INFO Call to connect returned Connection refused, "
     "retrying", "signal", "nccl_socket_error"),
    # Lightning 1.x under Slurm; RLlib's ES counting its episodes
    ("[2021-12-19 17:50:03,095][pytorch_lightning.utilities.distributed][INFO] - Multi-processing "
     "is handled by Slurm.", "start", "lightning_strategy_setup"),
    ("Collected 980 episodes 21895 timesteps so far this iter", "start",
     "ray_trajectory_collection"),
    # Ray's node started by ray.init; its processes not answering each other's calls
    ("2021-11-30 14:22:05,334 DEBUG node.py:899 -- Process STDOUT and STDERR is being redirected "
     "to /tmp/ray_logs/session_2021-11-30_14-22-05_334450_13873/logs.", "start", "ray_init"),
    ("(pid=gcs_server) [2022-07-21 02:39:09,932 E 159 159] (gcs_server) gcs_server.cc:283: Failed "
     "to get the resource load: GrpcUnavailable: RPC Error message: Connection timed out; RPC "
     "Error details: ", "signal", "ray_rpc_unavailable"),
])
def test_a_packs_words_from_its_frameworks_source_mean_what_their_rule_says(line, kind, rule):
    found = load_rule_set().match(line)
    assert found is not None
    by_kind = {"start": found.phase_starts, "done": found.phase_dones, "signal": found.signals}
    assert rule in {r.id for r in by_kind[kind]}


@pytest.mark.parametrize("line", [
    "gpu1:12:40 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
    "gpu1:12:40 [0] NCCL INFO Ring 00 : 15 -> 16 [send] via NET/Socket/0",
    "gpu1:12:40 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1",
])
def test_nccls_channel_arrows_are_no_failed_call(line: str):
    """NCCL's channels and trees are drawn with arrows too; only `file.cc:N -> code` is the
    trace of a call that failed."""
    found = load_rule_set().match(line)
    signals = {r.id for r in found.signals} if found is not None else set()
    assert not signals & {"dist_backend_error", "nccl_socket_error"}
