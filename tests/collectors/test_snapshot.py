"""Whole snapshots of real blocked jobs, with a fake NVML in the probe child."""

from __future__ import annotations

import argparse
import io
import json
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from hangwatch.collectors import snapshot as snapshot_module
from hangwatch.collectors.gpu import NVML_MODULE_ENV
from hangwatch.collectors.snapshot import SnapshotOptions, key_findings, take_snapshot
from hangwatch.collectors.stacks import PTRACE_HINT
from hangwatch.commands import snapshot as snapshot_command
from hangwatch.core.evidence import diagnose
from hangwatch.packs.load import load_pack_file
from tests.fakes.jobs import ZOMBIE_PARENT, stack_of, wait_for_text

FAKE_NVML = str(Path(__file__).resolve().parents[1] / "fakes" / "fake_nvml.py")
EVIDENCE_PACK = Path(__file__).resolve().parents[2] / "rules" / "evidence.yaml"
SECRETS = {"HF_TOKEN": "hf_secret123", "HF_ENDPOINT": "https://alice:pa55word@hub.example.com"}


@pytest.fixture
def nvml(monkeypatch):
    def use(scenario: dict) -> None:
        monkeypatch.setenv("FAKE_NVML", json.dumps(scenario))
    monkeypatch.setenv(NVML_MODULE_ENV, FAKE_NVML)
    use({"mode": "ok", "gpus": []})
    return use


def busy_gpus(job_pid: int) -> dict:
    return {"mode": "ok", "gpus": [
        {"name": "NVIDIA H100", "util": [100, 100], "mem": [70 * 2**30, 80 * 2**30],
         "temp": 71, "power_mw": 650000, "procs": [[job_pid, 60 * 2**30]]},
        {"name": "NVIDIA H100", "util": [99, 98], "mem": [2**30, 80 * 2**30], "temp": 60,
         "power_mw": 500000, "procs": [[4_000_000, 2**30]]},
    ]}


def test_blocked_job_is_found_from_its_log_with_its_stack_and_gpu(jobs, nvml, tmp_path):
    log = tmp_path / "train.log"
    child = jobs.blocked_python(log, env={**SECRETS, "RANK": "0"})
    nvml(busy_gpus(child.pid))
    snap = take_snapshot(SnapshotOptions(log_paths=(log,)))
    assert set(snap) >= {"taken_at", "gpus", "processes", "system", "discovery", "errors"}
    [process] = snap["processes"]
    assert (process["pid"], process["found_by"], process["status"]) == (
        child.pid, "log-writer", "sleeping")
    assert "wait_for_weights (child.py:" in stack_of(process)
    assert process["gpus"] == [0]
    assert snap["gpus"][0]["processes"][0]["in_job"] is True
    assert snap["gpus"][1]["processes"][0]["in_job"] is False
    assert snap["system"]["filesystems"][0]["path"] == str(log)
    findings = key_findings(snap)
    # Its stack grouped: the groups' sentence leads the findings, and stands for the
    # per-process "waits in" lines.
    [only] = snap["stack_groups"]
    assert (only["where"], only["pids"], only["ranks"]) == (
        "wait_for_weights (child.py)", [child.pid], [0])
    assert snap["members"][0]["rank"] == 0 and snap["suspects"] == []
    assert findings[0] == snap["stack_summary"] == "every process is in `wait_for_weights " \
                                                   "(child.py)`"
    assert not any(line.startswith(f"pid {child.pid} rank 0 (python") for line in findings)
    assert any(line.startswith("GPU0 NVIDIA H100: util 100% (100, 100), mem 70.0/80.0 GiB, "
                               f"71°C, 650 W, job pids {child.pid}") for line in findings)
    text = json.dumps(snap)
    assert "hf_secret123" not in text and "pa55word" not in text
    assert snap["errors"] == []


def probe_statuses() -> list[str]:
    """Statuses of our NVML probe children. A zombie's command line can no longer be read
    (psutil raises ZombieProcess), so a child that is already a zombie is counted as one."""
    statuses = []
    for child in psutil.Process().children():
        try:
            if "nvml_probe" in " ".join(child.cmdline()):
                statuses.append(child.status())
        except psutil.ZombieProcess:
            statuses.append("zombie")
        except psutil.NoSuchProcess:
            continue
    return statuses


def test_hung_nvml_never_holds_the_snapshot_past_its_bound(jobs, nvml, tmp_path):
    nvml({"mode": "hang"})
    child = jobs.blocked_python(tmp_path / "train.log")
    started = time.monotonic()
    snap = take_snapshot(SnapshotOptions(pids=(child.pid,), nvml_timeout=30, total_timeout=2))
    assert time.monotonic() - started < 3
    assert snap["nvml"]["status"] == "timeout"
    assert "wait_for_weights" in stack_of(snap["processes"][0])  # the rest still arrived
    assert all(status == "zombie" for status in probe_statuses())  # killed, awaiting reaping
    # NVML's own timeout is cut to fit the snapshot's bound: its probe dies before we return.
    assert "nvml: timeout: NVML did not answer within 1.5s: the GPU driver may be wedged " \
        "(nvidia-smi would hang too)" in key_findings(snap)


def test_hung_discovery_still_reads_the_named_processes(jobs, nvml, tmp_path, monkeypatch):
    never = threading.Event()
    monkeypatch.setattr(snapshot_module, "discover", lambda **kwargs: never.wait())
    child = jobs.blocked_python(tmp_path / "train.log")
    started = time.monotonic()
    snap = take_snapshot(SnapshotOptions(pids=(child.pid,), total_timeout=3))
    never.set()
    assert time.monotonic() - started < 4
    assert {"collector": "discovery", "error": "timed out"} in snap["errors"]
    assert [(p["pid"], p["status"]) for p in snap["processes"]] == [(child.pid, "sleeping")]


def test_nvml_timeout_inside_the_bound_is_a_finding_that_selects_advice(nvml):
    nvml({"mode": "hang"})
    snap = take_snapshot(SnapshotOptions(pids=(4_000_001,), nvml_timeout=1, total_timeout=5))
    assert snap["nvml"]["status"] == "timeout"
    advice = diagnose(load_pack_file(EVIDENCE_PACK).diagnoses, snap, phase=None, signals=())
    texts = " ".join(a.because for a in advice)
    assert "nvml=timeout (NVML did not answer within 1s" in texts
    # The named pid does not exist: a missing rank is evidence too.
    assert snap["processes"][0]["status"] == "dead"
    assert "process_status=dead (pid 4000001 is gone)" in texts


def test_zombie_child_is_reported_as_zombie(jobs, nvml):
    parent = jobs.start([sys.executable, "-c", ZOMBIE_PARENT], stdout=subprocess.PIPE)
    zombie_pid = int(parent.stdout.readline())
    time.sleep(0.1)
    snap = take_snapshot(SnapshotOptions(pids=(parent.pid,)))
    zombie = next(p for p in snap["processes"] if p["pid"] == zombie_pid)
    assert (zombie["status"], zombie["found_by"]) == ("zombie", "descendant")
    assert zombie["stack"] is None and zombie["stack_error"] == "the process is a zombie"
    assert f"pid {zombie_pid} ({zombie['name']}) is zombie" in key_findings(snap)


def test_stacks_can_be_turned_off(jobs, nvml, tmp_path):
    child = jobs.blocked_python(tmp_path / "train.log")
    snap = take_snapshot(SnapshotOptions(pids=(child.pid,), stacks=False))
    assert snap["processes"][0]["stack"] is None
    assert snap["processes"][0]["stack_error"] == "stacks disabled (--no-stacks)"


def test_ranks_blocked_in_all_reduce_select_the_collective_advice(jobs, nvml, tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "rank.py"
    script.write_text(textwrap.dedent("""
        import os, sys, time
        import torch, torch.distributed as dist
        rank = int(sys.argv[1])
        dist.init_process_group("gloo", rank=rank, world_size=2)
        print(f"rank {rank} ready", flush=True)
        if rank == 1:
            time.sleep(120)   # never joins: rank 0 waits in all_reduce forever
        dist.all_reduce(torch.ones(1))
    """))
    with socket.socket() as probe:  # a free port, so parallel test runs do not collide
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    log = tmp_path / "train.log"
    with log.open("w") as out:
        for rank in (0, 1):
            jobs.start([sys.executable, str(script), str(rank)], env={**env, "RANK": str(rank)},
                       stdout=out, stderr=subprocess.DEVNULL)
    wait_for_text(log, "rank 0 ready", timeout=60)
    wait_for_text(log, "rank 1 ready", timeout=60)
    time.sleep(0.3)
    snap = take_snapshot(SnapshotOptions(log_paths=(log,)))
    assert {p["found_by"] for p in snap["processes"]} == {"log-writer"}
    stack_of(snap["processes"][0])
    advice = diagnose(load_pack_file(EVIDENCE_PACK).diagnoses, snap, phase=None, signals=())
    collective = [a for a in advice if "blocked in a collective" in a.text]
    assert len(collective) == 1
    assert collective[0].because.startswith("stack: pid ")
    assert " rank 0 (" in collective[0].because
    assert "in all_reduce (torch/distributed/distributed_c10d.py:" in collective[0].because


# --- `hangwatch snapshot` -----------------------------------------------------------------------

def args(**kwargs):
    base = {"pid": [], "match": None, "log": [], "json": False, "stacks": True, "native": False,
            "report_dir": None}
    return argparse.Namespace(**{**base, **kwargs})


def test_command_prints_json(jobs, nvml, tmp_path):
    child = jobs.blocked_python(tmp_path / "train.log", env=SECRETS)
    out, err = io.StringIO(), io.StringIO()
    assert snapshot_command.run(args(pid=[child.pid], json=True), out, err) == 0
    snap = json.loads(out.getvalue())
    assert snap["processes"][0]["pid"] == child.pid
    assert "wait_for_weights" in stack_of(snap["processes"][0])
    assert "hf_secret123" not in out.getvalue()


def test_command_prints_readable_findings_tables_and_stacks(jobs, nvml, tmp_path):
    log = tmp_path / "train.log"
    child = jobs.blocked_python(log)
    nvml(busy_gpus(child.pid))
    out = io.StringIO()
    assert snapshot_command.run(args(log=[str(log)]), out, io.StringIO()) == 0
    text = out.getvalue()
    if PTRACE_HINT in text:
        pytest.skip("py-spy may not attach to processes on this machine")
    assert text.startswith("Key findings\n")
    assert "wait_for_weights (child.py:" in text
    assert f"│ {child.pid} │ log-writer │" in text
    assert "GPUs (* = a process of the job)" in text and f"{child.pid}*" in text
    assert "/dev/shm:" in text


def test_command_rejects_a_bad_regex_with_a_message():
    err = io.StringIO()
    assert snapshot_command.run(args(match="(unclosed"), io.StringIO(), err) == 2
    assert err.getvalue().startswith("hangwatch snapshot: --match '(unclosed' is not a valid")


def test_command_keeps_the_snapshot_redacted_in_a_folder_under_report_dir(jobs, nvml, tmp_path):
    child = jobs.blocked_python(tmp_path / "train.log", env=SECRETS)
    out, err = io.StringIO(), io.StringIO()
    assert snapshot_command.run(args(pid=[child.pid], json=True,
                                     report_dir=str(tmp_path / "reports")), out, err) == 0
    [folder] = (tmp_path / "reports").iterdir()
    assert folder.name.endswith("-snapshot") and str(folder) in err.getvalue()
    kept = json.loads((folder / "snapshot.json").read_text())
    assert kept["processes"][0]["pid"] == child.pid
    assert "hf_secret123" not in (folder / "snapshot.json").read_text()
    assert (folder / "stacks.txt").exists()
