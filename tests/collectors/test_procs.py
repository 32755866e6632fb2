"""Process records from real child processes, and from a fake psutil for the edge cases."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading

import pytest

from hangwatch.collectors.bounded import Background
from hangwatch.collectors.procs import describe, is_python
from tests.fakes.fake_psutil import FakeProcess, FakePsutil
from tests.fakes.jobs import ZOMBIE_PARENT, wait_for


def read(found, **kwargs):
    sink = {}
    describe(found, sink, cpu_interval=kwargs.pop("cpu_interval", 0.3), **kwargs)
    return sink


def test_blocked_python_child_is_sleeping_with_its_job_environment(jobs, tmp_path):
    child = jobs.blocked_python(tmp_path / "train.log", env={
        "RANK": "3", "WORLD_SIZE": "8", "NCCL_DEBUG": "INFO", "MASTER_PORT": "29500",
        "HOME_SECRET_STUFF": "x", "UNRELATED_VAR": "y", "HF_TOKEN": "hf_secret123",
        "HF_ENDPOINT": "https://user:password@hub.example.com/"},
        args=["--hf-token", "hf_argsecret"])
    record = read([(child.pid, "pid")])[child.pid]
    assert record["status"] == "sleeping"
    assert record["found_by"] == "pid"
    assert is_python(record)
    assert record["cpu_percent"] < 10
    assert record["rss"] > 0 and record["threads"] >= 1 and record["fds"] >= 3
    env = record["env"]
    assert env["RANK"] == "3" and env["NCCL_DEBUG"] == "INFO" and env["MASTER_PORT"] == "29500"
    assert "UNRELATED_VAR" not in env and "HOME_SECRET_STUFF" not in env
    assert env["HF_TOKEN"] == "<redacted>"
    assert env["HF_ENDPOINT"] == "https://<redacted>@hub.example.com/"
    assert record["cmdline"][-2:] == ["--hf-token", "<redacted>"]
    assert "secret123" not in repr(record) and "password" not in repr(record)


def test_spinning_child_is_running_at_high_cpu(jobs):
    child = jobs.start([sys.executable, "-c", "print('go', flush=True)\nwhile True: pass"],
                       stdout=subprocess.PIPE)
    assert child.stdout.readline() == "go\n"
    record = read([(child.pid, "match")], cpu_interval=0.5)[child.pid]
    # Well above the 10% that counts as running, even on a busy 2-core machine.
    assert record["cpu_percent"] > 30


def test_unreaped_child_is_a_zombie(jobs):
    parent = jobs.start([sys.executable, "-c", ZOMBIE_PARENT], stdout=subprocess.PIPE)
    zombie = int(parent.stdout.readline())
    wait_for(lambda: read([(zombie, "descendant")], cpu_interval=0)[zombie]["status"]
             == "zombie")
    record = read([(zombie, "descendant")], cpu_interval=0)[zombie]
    assert record["status"] == "zombie"
    assert record["ppid"] == parent.pid


def test_pid_that_does_not_exist_is_dead_not_an_error():
    record = read([(2**22 + 12345, "pid")])[2**22 + 12345]
    assert record["status"] == "dead"
    assert "no such process" in record["error"]


def test_listening_port_and_peer_are_recorded(jobs):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    code = ("import socket, time\n"
            "lst = socket.create_server(('127.0.0.1', 0))\n"
            f"c = socket.create_connection(('127.0.0.1', {port}))\n"
            "print(lst.getsockname()[1], flush=True)\n"
            "time.sleep(60)\n")
    child = jobs.start([sys.executable, "-c", code], stdout=subprocess.PIPE)
    own_port = int(child.stdout.readline())
    conn, _ = server.accept()
    record = read([(child.pid, "pid")], cpu_interval=0)[child.pid]
    conn.close()
    server.close()
    assert own_port in record["connections"]["listening"]
    assert {"remote": f"127.0.0.1:{port}", "status": "ESTABLISHED"}.items() <= \
        record["connections"]["peers"][0].items()


def test_access_denied_loses_only_that_field():
    ps = FakePsutil(FakeProcess(10, deny=("environ", "net_connections"),
                                environ={"RANK": "0"}))
    record = read([(10, "pid")], ps=ps, cpu_interval=0)[10]
    assert record["cmdline"] == ["python3", "x.py"]
    assert record["unreadable"] == ["connections: access denied", "env: access denied"]
    assert "env" not in record


def test_status_is_published_before_a_read_that_hangs():
    release = threading.Event()
    ps = FakePsutil(FakeProcess(11, status="disk-sleep", block=release))
    sink = {}
    statuses = threading.Event()
    job = Background(lambda: describe([(11, "pid")], sink, ps=ps, cpu_interval=0,
                                      statuses_read=statuses), "test-describe")
    assert statuses.wait(5)
    assert job.result(0.2) == (None, "timed out")  # stuck reading the environment
    assert sink[11]["status"] == "disk-sleep"
    release.set()
    assert job.result(5) == (None, None)
    assert "env" in sink[11]


@pytest.mark.parametrize(("exe", "name", "expected"), [
    ("/usr/bin/python3.11", "python3.11", True),
    ("/opt/conda/bin/python", "pt_main_thread", True),  # torch renames the thread, not the exe
    ("/usr/bin/pypy3", "pypy3", True),
    ("/usr/bin/python3", "ray::RolloutWorker", True),
    ("", "ray::RolloutWorker", True),  # exe unreadable: the Ray worker title still says it
    ("/usr/bin/tee", "tee", False),
    ("/usr/bin/bash", "bash", False),
])
def test_python_processes_are_recognised(exe, name, expected):
    assert is_python({"exe": exe, "name": name}) is expected


def test_rank_of_a_process_from_its_environment_then_its_command_line():
    from hangwatch.collectors.procs import rank_of

    assert rank_of({"RANK": "3", "LOCAL_RANK": "1"}, ["python", "--rank", "9"]) == "3"
    assert rank_of({}, ["python", "train.py", "--rank", "2"]) == "2"
    assert rank_of({}, ["python", "train.py", "--rank=5"]) == "5"
    assert rank_of({"LOCAL_RANK": "1"}, ["python", "train.py"]) == "1"
    assert rank_of({}, ["python", "train.py", "--local_rank=4"]) == "4"
    assert rank_of({}, ["python", "train.py", "--rank"]) is None
    assert rank_of({"RANK": "x"}, ["python"]) is None
