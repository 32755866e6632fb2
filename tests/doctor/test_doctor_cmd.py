"""`hangwatch doctor` end to end: the table, --json, exit statuses, --compare, a family that
blocks, a wedged NVML, and `run --doctor` refusing to start a job."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from hangwatch.cli import main
from hangwatch.collectors.gpu import NVML_MODULE_ENV
from hangwatch.doctor.model import Machine, Options
from hangwatch.doctor.runner import run_doctor

ROOT = Path(__file__).resolve().parents[2]
FAKE_NVML = str(ROOT / "tests" / "fakes" / "fake_nvml.py")


def doctor(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(["doctor", *args], out, err)
    return status, out.getvalue(), err.getvalue()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node(host: str, *, torch: str = "2.5.1", nccl_env: dict | None = None,
         rank: str = "1", gpus: int = 8) -> dict:
    env = {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "WORLD_SIZE": "16", "RANK": rank,
           "NCCL_SOCKET_IFNAME": "eth0", **(nccl_env or {})}
    return {"host": host, "checks": [{"id": "rendezvous.env", "status": "ok", "detail": "",
                                      "fix": ""}],
            "facts": {"versions": {"python": "3.11.7", "torch": torch}, "env": env,
                      "world_size": 16, "gpus": {"count": gpus},
                      "clock": {"synchronized": True, "offset_s": 0.001}}}


def write(tmp_path: Path, name: str, doc: dict) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_worker_with_master_port_closed_exits_1_naming_the_master(monkeypatch):
    port = closed_port()
    for k, v in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "1",
                 "WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(k, v)
    status, out, _ = doctor("--only", "rendezvous,limits")
    assert status == 1
    assert f"FAIL  rendezvous.master  master 127.0.0.1:{port}: connection refused" in out
    assert "fix: start the master (rank 0) first" in out
    assert out.splitlines()[-1].startswith("1 failed, ")


def test_json_output_has_checks_host_and_facts(tmp_path):
    status, out, _ = doctor("--json", "--only", "data,disk", "--data", str(tmp_path / "x"),
                            "--disk", str(tmp_path))
    doc = json.loads(out)
    assert status == 1
    assert doc["host"] == socket.gethostname()
    assert [c["id"] for c in doc["checks"]] == ["data.files", "data.hf_locks", "disk.free"]
    assert set(doc["checks"][0]) == {"id", "status", "detail", "fix"}
    assert doc["facts"]["disk_free"][str(tmp_path)] > 0


def test_unknown_family_and_bad_pack_are_usage_errors(tmp_path):
    status, _, err = doctor("--only", "gpus")
    assert status == 2 and "--only: no family gpus" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("pack: bad\nchecks:\n  - id: x\n")
    status, _, err = doctor("--only", "packs", "--rules", str(bad))
    assert status == 2 and f"{bad}:3: rule x: a check needs one of" in err


def test_compare_names_the_nccl_env_and_torch_version_that_differ(tmp_path):
    a = write(tmp_path, "a.json", node("node-a"))
    b = write(tmp_path, "b.json", node("node-b", torch="2.4.0", rank="0",
                                       nccl_env={"NCCL_IB_DISABLE": "1"}))
    status, out, _ = doctor("--compare", a, b)
    assert status == 1
    lines = out.splitlines()
    assert lines[0] == "compared 2 nodes: node-a, node-b"
    assert any(line.split() == ["DIFFERS", "versions.torch", "node-a=2.5.1", "node-b=2.4.0"]
               for line in lines)
    assert any(line.split() == ["DIFFERS", "env.NCCL_IB_DISABLE", "node-a=(unset)",
                                "node-b=1"] for line in lines)
    assert lines[-1] == "2 difference(s) that must agree, 0 that may"
    status, out, _ = doctor("--compare", a, b, "--json")
    keys = {d["key"]: d["must_agree"] for d in json.loads(out)["differences"]}
    assert keys == {"versions.torch": True, "env.NCCL_IB_DISABLE": True}


def test_compare_allows_local_names_but_not_repeated_ranks(tmp_path):
    a = write(tmp_path, "a.json", node("node-a"))
    b = write(tmp_path, "b.json", node("node-b", rank="0",
                                       nccl_env={"NCCL_SOCKET_IFNAME": "ens5"}))
    status, out, _ = doctor("--compare", a, b)
    assert status == 0 and "differs  env.NCCL_SOCKET_IFNAME" in out
    c = write(tmp_path, "c.json", node("node-c", gpus=4))  # rank 1 again
    status, out, _ = doctor("--compare", a, b, c)
    assert status == 1
    assert "two nodes claim the same rank" in out
    assert "DIFFERS  gpus.count" in out


def test_compare_of_a_file_that_is_not_doctor_json_is_a_usage_error(tmp_path):
    bad = write(tmp_path, "bad.json", {"checks": []})
    status, _, err = doctor("--compare", bad)
    assert status == 2 and f"{bad}: not the output of `hangwatch doctor --json`" in err


def test_a_family_that_blocks_is_a_fail_and_the_doctor_ends_on_time(tmp_path):
    fifo = tmp_path / "train.jsonl"
    os.mkfifo(fifo)  # opening it for reading blocks until a writer comes, like a dead mount
    started = time.monotonic()
    report = run_doctor(Machine(env={}), Options(data=(fifo,), timeout=1.0),
                        families=("data", "limits"))
    assert time.monotonic() - started < 1.5
    blocked = report.checks[0]
    assert (blocked.id, blocked.status) == ("data", "fail")
    assert "did not finish within 1s" in blocked.detail
    assert [c.id for c in report.checks[1:]] == ["limits.memlock", "limits.nofile"]
    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # let the blocked thread go


def test_wedged_nvml_does_not_stop_the_whole_doctor_ending_in_time(tmp_path):
    env = {**os.environ, NVML_MODULE_ENV: FAKE_NVML, "FAKE_NVML": '{"mode": "hang"}',
           "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "hangwatch", "doctor", "--json", "--timeout",
                           "4s"], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=30)
    elapsed = time.monotonic() - started
    assert elapsed < 7.0, elapsed  # 4 s of checks and an interpreter's start
    doc = json.loads(proc.stdout)
    nvml = next(c for c in doc["checks"] if c["id"] == "gpu.nvml")
    assert nvml["status"] == "fail" and "wedged" in nvml["detail"]
    assert proc.returncode == 1
    assert doc["elapsed_s"] < 4.5


def test_run_doctor_refuses_to_start_the_job_on_a_failed_check(tmp_path, monkeypatch):
    marker = tmp_path / "started"
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(closed_port()))
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    out, err = io.StringIO(), io.StringIO()
    argv = ["run", "--doctor", "--log", str(tmp_path / "job.log"), "--report-dir",
            str(tmp_path / "reports"), "--", sys.executable, "-c",
            f"open({str(marker)!r}, 'w')"]
    status = main(argv, out, err)
    assert status == 1
    assert "a preflight check failed; the job was not started" in err.getvalue()
    assert "FAIL  rendezvous.master" in err.getvalue()
    assert not marker.exists()
    monkeypatch.setenv("RANK", "0")  # the master's port is free: the job runs
    status = main(argv, out, err)
    assert status == 0 and marker.exists()


def test_compare_flags_clocks_more_than_a_second_apart(tmp_path):
    a_doc, b_doc = node("node-a"), node("node-b", rank="0")
    b_doc["facts"]["clock"] = {"synchronized": False, "offset_s": 2.5}
    status, out, _ = doctor("--compare", write(tmp_path, "a.json", a_doc),
                            write(tmp_path, "b.json", b_doc))
    assert status == 1
    assert "DIFFERS  clock.offset_s" in out and "clocks differ by 2.5s" in out
    assert "differs  clock.synchronized" in out
