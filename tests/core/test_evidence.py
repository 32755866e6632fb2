"""Facts read off snapshots, and the advice they select, with the evidence that selected it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangwatch.core.evidence import diagnose, facts, telling_frame
from hangwatch.core.model import DiagnosisRule, Origin
from hangwatch.packs.load import load_pack_file

EVIDENCE_PACK = Path(__file__).resolve().parents[2] / "rules" / "evidence.yaml"
GIB = 2**30


def gpu(index, util, pids=()):
    return {"index": index, "name": "NVIDIA H100", "utilization": util,
            "utilization_samples": [util, util], "memory_used": GIB, "memory_total": 80 * GIB,
            "processes": [{"pid": p, "used_memory": GIB, "in_job": True} for p in pids]}


def proc(pid, status="sleeping", cpu=0.0, stack=None, rank=None, name="python3"):
    return {"pid": pid, "name": name, "status": status, "cpu_percent": cpu, "stack": stack,
            "env": {"RANK": str(rank)} if rank is not None else {}}


def snap(gpus=(), processes=(), nvml="ok", shm=10.0, disk=50.0, detail=""):
    return {
        "nvml": {"status": nvml, "detail": detail, "elapsed_s": 1.1},
        "gpus": list(gpus),
        "processes": list(processes),
        "system": {
            "shm": {"path": "/dev/shm", "total": 16 * GIB, "used": int(16 * GIB * shm / 100),
                    "free": 0, "used_percent": shm},
            "filesystems": [{"path": "/data/train.log", "total": 100 * GIB,
                             "used": int(disk * GIB), "free": int((100 - disk) * GIB),
                             "used_percent": disk}],
        },
    }


def stack(*frames, thread='Thread 10 (idle): "MainThread"'):
    return "Python v3.11.7 (/usr/bin/python3.11)\n\n" + thread + "\n" + "\n".join(
        f"    {f}" for f in frames)


SLEEPING = [proc(10, rank=0), proc(11, rank=1)]
ALL_REDUCE = "all_reduce (torch/distributed/distributed_c10d.py:3252)"


# --- facts ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("utils", "value", "evidence"), [
    ([100, 99], "busy", "GPU0 util 100%, GPU1 util 99%"),
    ([90, 95], "busy", "GPU0 util 90%, GPU1 util 95%"),
    ([0, 5], "idle", "GPU0 util 0%, GPU1 util 5%"),
    ([100, 0], "mixed", "GPU0 util 100%, GPU1 util 0%"),
    ([89, 100], "mixed", "GPU0 util 89%, GPU1 util 100%"),
])
def test_gpu_utilization_makes_the_gpus_fact(utils, value, evidence):
    found = facts(snap(gpus=[gpu(i, u) for i, u in enumerate(utils)]), phase=None, signals=())
    assert found["gpus"] == (value, evidence)


def test_only_the_jobs_gpus_count_when_the_job_can_be_seen_on_them():
    gpus = [gpu(0, 100, pids=[10]), gpu(1, 0, pids=[]), gpu(2, 98, pids=[11])]
    assert facts(snap(gpus=gpus, processes=SLEEPING), phase=None, signals=())["gpus"] == (
        "busy", "GPU0 util 100%, GPU2 util 98%")


def test_no_gpu_says_why():
    found = facts(snap(nvml="missing", detail="no NVIDIA driver"), phase=None, signals=())
    assert found["gpus"] == ("none", "no GPU seen (NVML: missing)")
    assert found["nvml"] == ("missing", "no NVIDIA driver")


def test_processes_all_sleeping_names_the_busiest():
    found = facts(snap(processes=[proc(10, cpu=0.3), proc(11, cpu=2.0, rank=1)]),
                  phase=None, signals=())
    assert found["processes"] == (
        "all_sleeping", "2 process(es), none running; highest CPU 2.0% (pid 11 rank 1 (python3))")


def test_a_sleeping_process_burning_cpu_counts_as_running():
    found = facts(snap(processes=[proc(10, cpu=0.0), proc(11, status="sleeping", cpu=97.5)]),
                  phase=None, signals=())
    assert found["processes"] == ("some_running", "pid 11 (python3) sleeping at 97.5% CPU")


def test_zombies_and_dead_processes_are_not_counted_as_alive():
    found = facts(snap(processes=[proc(10, status="zombie"), proc(11, status="dead")]),
                  phase=None, signals=())
    assert found["processes"] == ("none_found", "no live process of the job (2 zombie or gone)")
    assert found["process_status"] == (
        "zombie, dead", "pid 10 (python3) is a zombie; pid 11 (python3) is gone")


@pytest.mark.parametrize(("percent", "value"), [(95.0, "full"), (94.9, "ok"), (100.0, "full")])
def test_shm_is_full_from_95_percent(percent, value):
    assert facts(snap(shm=percent), phase=None, signals=())["shm"][0] == value


@pytest.mark.parametrize(("percent", "value"), [(98.0, "full"), (97.9, "ok")])
def test_disk_is_full_from_98_percent(percent, value):
    found = facts(snap(disk=percent), phase=None, signals=())["disk"]
    assert found[0] == value
    assert found[1].startswith(f"filesystem of /data/train.log {percent:g}% used (")


def test_stack_fact_is_the_telling_frame_of_each_process():
    processes = [proc(10, rank=0, stack=stack(ALL_REDUCE, "<module> (train.py:8)")),
                 proc(11, rank=1, stack=stack("wait (threading.py:327)",
                                              "get (queue.py:171)", "loop (worker.py:40)"))]
    found = facts(snap(processes=processes), phase="weight_sync", signals=["nccl_timeout"])
    assert found["stack"] == (
        f"{ALL_REDUCE} | loop (worker.py:40)",
        f"pid 10 rank 0 (python3) in {ALL_REDUCE}; pid 11 rank 1 (python3) in loop "
        "(worker.py:40)")
    assert found["phase"] == ("weight_sync", "stalled in phase weight_sync")
    assert found["signal"] == ("nccl_timeout", "signal nccl_timeout seen")


def test_telling_frame_prefers_the_main_thread_and_skips_plumbing():
    text = ("Python v3.11\n\n"
            "Thread 7 (idle): \"pt_autograd_0\"\n    wait (threading.py:320)\n"
            "    run (autograd.py:9)\n"
            "Thread 5 (idle): \"MainThread\"\n    select (selectors.py:468)\n"
            "    result (concurrent/futures/_base.py:451)\n    fetch (loader.py:22)\n")
    assert telling_frame(text) == "fetch (loader.py:22)"
    only_plumbing = "Thread 1 (idle)\n    wait (threading.py:320)\n"
    assert telling_frame(only_plumbing) == "wait (threading.py:320)"
    assert telling_frame(None) is None


# --- diagnose ---------------------------------------------------------------------------------

def rule(rule_id, advice, **when):
    return DiagnosisRule(id=rule_id, when=tuple((k, tuple(v)) for k, v in when.items()),
                         origin=Origin("t.yaml", 1, "t"), advice=(advice,))


def test_every_condition_must_hold():
    rules = [rule("r", "blocking call", gpus=["idle"], processes=["all_sleeping"])]
    idle_sleeping = snap(gpus=[gpu(0, 0)], processes=SLEEPING)
    idle_running = snap(gpus=[gpu(0, 0)], processes=[proc(10, status="running", cpu=100)])
    assert [a.text for a in diagnose(rules, idle_sleeping, phase=None, signals=())] == [
        "blocking call"]
    assert diagnose(rules, idle_running, phase=None, signals=()) == []


def test_because_carries_the_concrete_evidence():
    rules = [rule("r", "spinning", gpus=["busy"], stack=[r"^all_reduce\s"])]
    processes = [proc(10, rank=0, stack=stack(ALL_REDUCE)),
                 proc(11, rank=1, stack=stack(ALL_REDUCE))]
    advice = diagnose(rules, snap(gpus=[gpu(0, 100), gpu(1, 99)], processes=processes),
                      phase=None, signals=())
    assert [(a.text, a.because) for a in advice] == [(
        "spinning",
        "gpus=busy (GPU0 util 100%, GPU1 util 99%); "
        f"stack: pid 10 rank 0 (python3) in {ALL_REDUCE} (and 1 more processes)")]


def test_phase_and_signal_conditions():
    rules = [rule("p", "in sync", phase=["weight_sync"]),
             rule("s", "timed out", signal=["nccl_timeout", "ray_timeout"])]
    advice = diagnose(rules, snap(), phase="weight_sync", signals=["ray_timeout"])
    assert [(a.text, a.because) for a in advice] == [
        ("in sync", "phase=weight_sync (stalled in phase weight_sync)"),
        ("timed out", "signal=ray_timeout (signal ray_timeout seen)")]
    assert diagnose(rules, snap(), phase=None, signals=()) == []


def test_same_advice_from_two_rules_is_given_once():
    rules = [rule("a", "same", gpus=["busy"]), rule("b", "same", nvml=["ok"])]
    assert len(diagnose(rules, snap(gpus=[gpu(0, 100)]), phase=None, signals=())) == 1


def test_empty_snapshot_selects_nothing_and_does_not_fail():
    rules = load_pack_file(EVIDENCE_PACK).diagnoses
    assert diagnose(rules, {}, phase=None, signals=()) == []


# --- the built-in evidence pack: every rule has a case that fires it ---------------------------

def with_stack(*frames):
    return snap(gpus=[gpu(0, 0)], processes=[proc(10, rank=0, stack=stack(*frames))])


CASES = {
    "gpus_busy_no_progress": (snap(gpus=[gpu(0, 100), gpu(1, 99)], processes=SLEEPING),
                              "GPU0 util 100%, GPU1 util 99%"),
    "gpus_mixed": (snap(gpus=[gpu(0, 100), gpu(1, 0)]), "GPU1 util 0%"),
    "idle_and_sleeping": (snap(gpus=[gpu(0, 0)], processes=SLEEPING), "none running"),
    "cpu_bound_gpus_idle": (snap(gpus=[gpu(0, 1)], processes=[proc(10, "running", 99.0)]),
                            "running at 99.0% CPU"),
    "disk_sleep": (snap(processes=[proc(10, "disk-sleep")]), "uninterruptible disk sleep"),
    "worker_died": (snap(processes=[proc(10), proc(11, "zombie", rank=1)]),
                    "pid 11 rank 1 (python3) is a zombie"),
    "process_stopped": (snap(processes=[proc(10, "stopped")]), "stopped (T)"),
    "no_process": (snap(), "no process of the job found"),
    "shm_full": (snap(shm=99.0), "/dev/shm 99% used"),
    "disk_full": (snap(disk=99.5), "/data/train.log 99.5% used"),
    "nvml_timeout": (snap(nvml="timeout", detail="NVML did not answer within 10s"),
                     "nvml=timeout (NVML did not answer within 10s)"),
    "nvml_error": (snap(nvml="error", detail="NVMLError_GpuIsLost: GPU is lost"), "GpuIsLost"),
    "stack_collective": (with_stack(ALL_REDUCE), ALL_REDUCE),
    "stack_cuda_sync": (with_stack("synchronize (torch/cuda/__init__.py:985)"), "synchronize"),
    "stack_ray_get": (with_stack("get (ray/_private/worker.py:2630)",
                                 "wrapper (ray/_private/client_mode_hook.py:103)"),
                      "get (ray/_private/worker.py:2630)"),
    "stack_rendezvous": (with_stack("_create_c10d_store (torch/distributed/rendezvous.py:199)",
                                    "init_process_group (torch/distributed/distributed_c10d.py"
                                    ":1892)"), "_create_c10d_store"),
    "stack_dataloader": (with_stack("_try_get_data (torch/utils/data/dataloader.py:1133)"),
                         "_try_get_data"),
    "stack_socket_wait": (with_stack("recv_into (ssl.py:1314)", "readinto (socket.py:706)"),
                          "recv_into (ssl.py:1314)"),
}


def test_every_evidence_rule_has_a_case():
    ids = {r.id for r in load_pack_file(EVIDENCE_PACK).diagnoses}
    assert ids == set(CASES)


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_evidence_rule_fires_on_its_case_with_the_evidence(rule_id):
    rules = {r.id: r for r in load_pack_file(EVIDENCE_PACK).diagnoses}
    snapshot, evidence = CASES[rule_id]
    advice = diagnose([rules[rule_id]], snapshot, phase=None, signals=())
    assert [a.text for a in advice] == list(rules[rule_id].advice)
    assert evidence in advice[0].because


def test_a_plain_wait_in_threading_selects_no_stack_rule():
    rules = [r for r in load_pack_file(EVIDENCE_PACK).diagnoses if r.id.startswith("stack_")]
    quiet = with_stack("wait (threading.py:327)", "get (queue.py:180)", "run (worker.py:12)")
    assert diagnose(rules, quiet, phase=None, signals=()) == []
