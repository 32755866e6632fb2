"""Finding the job: real log writers, a `| tee` pipeline, descendants, --match, and a fake
/proc tree for the cases a real machine will not stage on demand."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hangwatch.collectors.discover import ProcFS, discover
from tests.fakes.fake_psutil import FakePsutil
from tests.fakes.jobs import BLOCKED_CHILD, wait_for_text
from tests.fakes.proc_tree import O_RDONLY, O_WRONLY_APPEND, add_process


def by_pid(found):
    return {f.pid: f for f in found}


def test_python_writing_the_log_is_found_as_its_writer(jobs, tmp_path):
    log = tmp_path / "train.log"
    child = jobs.blocked_python(log)
    found, notes = discover(log_paths=[log])
    assert by_pid(found)[child.pid].found_by == "log-writer"
    assert by_pid(found)[child.pid].via.startswith(f"has {log} open for writing (fd ")
    assert notes == []


def test_tee_pipeline_finds_the_python_feeding_tee(jobs, tmp_path):
    log = tmp_path / "train.log"
    script = tmp_path / "child.py"
    script.write_text(BLOCKED_CHILD)
    shell = jobs.start(["sh", "-c", f"{sys.executable} {script} - | tee {log} >/dev/null"])
    wait_for_text(log, "step 1 done")
    found = by_pid(discover(log_paths=[log])[0])
    writers = [f for f in found.values() if f.found_by == "log-writer"]
    feeders = [f for f in found.values() if f.found_by == "group-of-writer"]
    assert [Path(f"/proc/{w.pid}/comm").read_text().strip() for w in writers] == ["tee"]
    assert len(feeders) == 1
    python = feeders[0]
    assert Path(f"/proc/{python.pid}/cmdline").read_text().split("\0")[1] == str(script)
    assert python.via == f"writes into the pipe read by tee (pid {writers[0].pid})"
    assert shell.pid not in found  # the shell holds neither the log nor the pipe


def test_children_of_a_writer_are_descendants(jobs, tmp_path):
    log = tmp_path / "train.log"
    code = (f"import subprocess, sys, time\n"
            f"c = subprocess.Popen(['sleep', '60'])\n"
            f"log = open({str(log)!r}, 'a', buffering=1)\n"
            f"log.write(f'worker {{c.pid}}\\n')\n"
            f"time.sleep(60)\n")
    parent = jobs.start([sys.executable, "-c", code])
    wait_for_text(log, "worker")
    worker = int(log.read_text().split()[1])
    found = by_pid(discover(log_paths=[log])[0])
    assert found[parent.pid].found_by == "log-writer"
    assert found[worker].found_by == "descendant"
    assert found[worker].via == f"child of {parent.pid}"


def test_match_adds_processes_by_command_line_but_never_ourselves(jobs, tmp_path):
    marker = f"hangwatch-marker-{os.getpid()}"
    child = jobs.start([sys.executable, "-c", "import time; time.sleep(60)", marker])
    # Our own command line (pytest) and our parents must not match even when the regex does.
    # Our helper (the NVML probe) is our child, runs python, and must not match either.
    probe = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                              "-m", "hangwatch.collectors.nvml_probe"])
    try:
        found = by_pid(discover(match=f"{marker}|pytest|python")[0])
    finally:
        probe.kill()
        probe.wait()
    assert found[child.pid].found_by == "match"
    assert probe.pid not in found
    assert os.getpid() not in found
    assert os.getppid() not in found


def test_explicit_pid_wins_over_other_ways_of_finding_it(jobs, tmp_path):
    log = tmp_path / "train.log"
    child = jobs.blocked_python(log)
    found = by_pid(discover(pids=[child.pid], log_paths=[log])[0])
    assert found[child.pid].found_by == "pid"


def test_run_child_tree_is_kept_even_though_it_descends_from_us(tmp_path):
    child = subprocess.Popen(["sleep", "60"])  # our own child, as `hangwatch run` starts it
    try:
        found = by_pid(discover(known_tree=[child.pid])[0])
        assert found[child.pid].found_by == "run-child"
    finally:
        child.kill()
        child.wait()


def test_log_that_does_not_exist_is_a_note(tmp_path):
    found, notes = discover(log_paths=[tmp_path / "missing.log"])
    assert found == []
    assert notes[0].startswith(f"{tmp_path / 'missing.log'}: No such file")
    assert "--pid PID or --match REGEX" in notes[-1]


# --- a fake /proc tree ---------------------------------------------------------------------

def test_proc_scan_finds_a_writer_by_inode_when_psutil_cannot(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("")
    root = tmp_path / "proc"
    add_process(root, 100, comm="python3", fds={1: (str(log), O_WRONLY_APPEND)})
    add_process(root, 101, comm="less", fds={3: (str(log), O_RDONLY)})  # only reads it
    add_process(root, 102, comm="python3", ppid=100)
    found, _ = discover(log_paths=[log], procfs=ProcFS(root), ps=FakePsutil(), self_pid=1)
    assert [(f.pid, f.found_by) for f in found] == [(100, "log-writer"), (102, "descendant")]
    assert found[0].via == f"has {log} open for writing (fd 1)"


def test_untraceable_pipe_falls_back_to_the_writers_process_group(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("")
    root = tmp_path / "proc"
    # tee reads a pipe whose writer's fds cannot be read (another user's process).
    add_process(root, 200, comm="python3", pgrp=200)
    add_process(root, 201, comm="tee", pgrp=200, ppid=1,
                fds={0: ("pipe:[777]", O_RDONLY), 1: (str(log), O_WRONLY_APPEND)})
    add_process(root, 300, comm="python3", pgrp=300)  # another job: not in the group
    found, _ = discover(log_paths=[log], procfs=ProcFS(root), ps=None, self_pid=1)
    assert by_pid(found)[200].found_by == "group-of-writer"
    assert by_pid(found)[200].via == "in the process group of tee (pid 201)"
    assert 300 not in by_pid(found)


def test_comm_with_spaces_and_parentheses_is_parsed(tmp_path):
    root = tmp_path / "proc"
    add_process(root, 400, comm="ray::Worker (x) y", ppid=7, pgrp=40, session=4)
    entry = ProcFS(root).entry(400)
    assert (entry.comm, entry.ppid, entry.pgrp, entry.session) == ("ray::Worker (x) y", 7, 40, 4)
