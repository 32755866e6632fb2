"""Flight Recorder dumps: real ones written by a two-rank gloo job, found from the job's
environment, summarised without running code from them, and given to torch's analyzer."""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hangwatch.collectors import flight
from hangwatch.core.events import StallEvent
from hangwatch.reporters.incident import write_incident

JOB = textwrap.dedent("""
    import os, pickle, sys, datetime, time
    import torch, torch.distributed as dist
    import torch._C._distributed_c10d as c10d
    rank, port, prefix = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("gloo", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=60))
    t = torch.ones(4)
    for _ in range(3):
        dist.all_reduce(t)
    dist.all_gather([torch.zeros(4), torch.zeros(4)], t)
    deadline = time.monotonic() + 20  # the recorder retires work on a thread of its own
    while True:
        trace = c10d._dump_fr_trace()
        entries = pickle.loads(trace).get("entries", [])
        if all(e.get("retired") for e in entries) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    with open(f"{prefix}{rank}", "wb") as fh:  # what a watchdog timeout would write
        fh.write(trace)
    dist.destroy_process_group()
""")


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> str:
    """The prefix of two real dumps (ranks 0 and 1)."""
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("fr")
    (folder / "job.py").write_text(JOB)
    prefix = str(folder / "nccl_trace_rank_")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = {**os.environ, "TORCH_FR_BUFFER_SIZE": "2000"}
    ranks = [subprocess.Popen([sys.executable, str(folder / "job.py"), str(r), port, prefix],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for r in range(2)]
    assert [p.wait(timeout=120) for p in ranks] == [0, 0]
    return prefix


def job_process(prefix: str, **env: str) -> dict:
    return {"pid": 1, "env": {"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_FR_DUMP_TEMP_FILE": prefix,
                              **env}}


def test_dumps_are_found_from_the_jobs_environment_and_summarised(dumps):
    found = flight.collect([job_process(dumps)], timeout=60)
    assert found is not None
    assert found["prefixes"] == [dumps]
    assert [d["rank"] for d in found["dumps"]] == [0, 1]
    last = found["dumps"][0]["last"]
    assert [e["op"] for e in last] == ["gloo:all_reduce"] * 3 + ["gloo:all_gather"]
    assert [e["collective_seq_id"] for e in last] == [1, 2, 3, 4]
    assert found["dumps"][0]["waiting_in"] is None  # every collective retired


def test_torchs_analyzer_runs_and_its_verdict_is_reported_whatever_it_is(dumps):
    found = flight.collect([job_process(dumps)], timeout=120)
    assert found is not None
    analysis = found["analysis"]
    assert analysis["tool"].endswith("-m torch.distributed.flight_recorder.fr_trace")
    # torch 2.13's analyzer does not take gloo dumps (it looks their group up by a name they
    # do not carry); what it said is kept, and the status says it failed.
    assert analysis["status"] == "ok" or analysis["status"].startswith("failed (exit")
    assert analysis["output"]


def test_without_torch_the_report_says_the_analyzer_is_not_installed(dumps, tmp_path):
    bare = tmp_path / "python-without-torch"
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -I -S \"$@\"\n")
    bare.chmod(0o755)
    analysis = flight.analyze(flight.find_dumps(dumps), [str(bare)], timeout=60)
    assert analysis["status"] == "not installed"
    assert "torch.distributed.flight_recorder) is not installed here" in analysis["output"]


def test_no_recorder_no_section():
    assert flight.collect([{"pid": 1, "env": {"RANK": "0"}}], timeout=5) is None


def test_recorder_on_but_no_dump_yet_is_said(tmp_path):
    found = flight.collect([job_process(str(tmp_path / "trace_"))], timeout=5)
    assert found is not None and found["dumps"] == []
    assert "no dump was written yet" in found["note"]


def test_a_dump_that_would_run_code_is_refused(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "owned"),))

    path = tmp_path / "nccl_trace_rank_0"
    path.write_bytes(pickle.dumps({"entries": [Evil()]}))
    summary = flight.summarize(path)
    assert "refusing" in summary["error"]
    assert not (tmp_path / "owned").exists()


def test_the_incident_report_holds_the_dumps_and_the_analysis(dumps, tmp_path):
    recorder = flight.collect([job_process(dumps)], timeout=120)
    stall = StallEvent("train_loop", "Training loop", None, 60.0, 30.0, 1_767_225_600.0)
    folder = write_incident(tmp_path, stall=stall, timeline=[], log_tail=[], sources=["x.log"],
                            snapshot={"processes": [], "flight_recorder": recorder},
                            advice=[])
    copies = sorted(p.name for p in (folder / "flight-recorder").iterdir())
    assert copies == ["analysis.txt", "nccl_trace_rank_0", "nccl_trace_rank_1"]
    assert (folder / "flight-recorder" / "nccl_trace_rank_0").read_bytes() == Path(
        f"{dumps}0").read_bytes()
    markdown = (folder / "report.md").read_text()
    assert "## Flight Recorder" in markdown and "torch's analyzer" in markdown
