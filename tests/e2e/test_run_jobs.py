"""`hangwatch run` as a CI gate over real jobs that really hang: PyTorch distributed on CPU,
a multiprocessing deadlock, a launcher printing only noise; and jobs that must pass through.

Every job process appends its pid to $JOB_PIDS_FILE, so each test can check that none of
them outlives hangwatch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
JOBS = Path(__file__).resolve().parent / "jobs"
SLACK_S = 6.0  # stall detection to exit: the snapshot (py-spy, NVML probe) and the 1 s grace


@dataclass
class Run:
    status: int
    stdout: str
    stderr: str
    quiet_s: float  # from the job's last stdout line to hangwatch's exit
    pids: list[int]
    dir: Path

    def report(self) -> dict[str, Any]:
        [report] = (self.dir / "hangwatch-reports").glob("*/report.json")
        return json.loads(report.read_text())

    def stacks(self) -> list[str]:
        """Every Python stack in the report. Where py-spy is missing or may not attach
        (ptrace_scope without CAP_SYS_PTRACE), the rest of the test has passed; skip."""
        processes = self.report()["processes"]
        stacks = [p["stack"] for p in processes if p.get("stack")]
        errors = [p.get("stack_error") or "" for p in processes]
        if not stacks and any("py-spy" in e for e in errors):
            pytest.skip(f"no stacks here: {errors[0]}")
        return stacks

    def leftovers(self) -> list[int]:
        """Job processes still alive; killed here, so a failing test leaks nothing."""
        left = []
        for pid in self.pids:
            try:
                proc = psutil.Process(pid)
                if proc.status() != psutil.STATUS_ZOMBIE:
                    left.append(pid)
                    proc.kill()
            except psutil.NoSuchProcess:
                pass
        return left


def hangwatch_run(tmp_path: Path, job: str, *job_args: str, stall: str = "3s",
                  options: tuple[str, ...] = (), env: dict[str, str] | None = None,
                  timeout: float = 60) -> Run:
    pids_file = tmp_path / "pids"
    child_env = {**os.environ, "JOB_PIDS_FILE": str(pids_file), **(env or {}),
                 "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "hangwatch", "run", "--stall", stall, "--grace", "1s", *options,
         "--", sys.executable, str(JOBS / job), *job_args],
        cwd=tmp_path, env=child_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    last_line = [time.monotonic()]
    stdout_lines: list[bytes] = []
    stderr_chunks: list[bytes] = []

    def read_stdout() -> None:
        for line in proc.stdout or []:
            stdout_lines.append(line)
            if not line.startswith(b"::"):  # hangwatch's own GitHub annotation, at the end
                last_line[0] = time.monotonic()

    readers = [threading.Thread(target=read_stdout),
               threading.Thread(target=lambda: stderr_chunks.extend(proc.stderr or []))]
    for reader in readers:
        reader.start()
    try:
        status = proc.wait(timeout=timeout)
        ended = time.monotonic()
    except subprocess.TimeoutExpired:
        proc.terminate()  # hangwatch passes it on: the job goes down with it
        proc.wait(timeout=30)
        pytest.fail(f"hangwatch run did not finish within {timeout}s")
    finally:
        for reader in readers:
            reader.join()
    pids = [int(p) for p in pids_file.read_text().split()] if pids_file.exists() else []
    return Run(status, b"".join(stdout_lines).decode(errors="replace"),
               b"".join(stderr_chunks).decode(errors="replace"),
               ended - last_line[0], pids, tmp_path)


# --- PyTorch distributed on CPU (gloo) ------------------------------------------------------
# Three gloo ranks meeting on a loaded 2-core machine can take longer than the stall these
# tests wait for: the process group's set-up gets a threshold of its own (--phase-stall).
SLOW_START_OK = ("--phase-stall", "dist_init=60s")


def test_ddp_rank_skipping_all_reduce_fails_fast_with_the_blocked_ranks_stack(tmp_path):
    pytest.importorskip("torch")
    summary = tmp_path / "summary.md"
    run = hangwatch_run(tmp_path, "ddp_skip_allreduce.py", "--skip-at", "3", stall="5s",
                        options=("--junit", "junit.xml", *SLOW_START_OK),
                        env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert run.status == 3, run.stderr
    assert run.quiet_s < 5 + SLACK_S
    assert "step 2 loss" in run.stdout and "step 3 loss" not in run.stdout
    report = run.report()
    assert report["stall"]["phase"] == "train_loop"
    assert [e["phase"] for e in report["timeline"]] == ["dist_init", "train_loop"]
    assert len(run.pids) == 3  # the launcher and two ranks
    assert run.leftovers() == []
    # the CI outputs: an annotation, a step summary, a failed test case
    assert "::error title=hangwatch%3A stall in Training loop (train_loop)::" in run.stdout
    text = summary.read_text()
    assert "## hangwatch: stalled in Training loop (train_loop)" in text
    failure = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite/testcase/failure")
    assert failure is not None and "train_loop" in failure.get("message", "")
    # and the evidence: rank 0 waits inside all_reduce for the rank that skipped it
    blocked = "all_reduce (torch/distributed/distributed_c10d.py"
    assert any(blocked in s for s in run.stacks())
    assert blocked in text


def test_rank_that_never_joins_stalls_in_distributed_init(tmp_path):
    pytest.importorskip("torch")
    run = hangwatch_run(tmp_path, "dist_missing_rank.py", stall="4s")
    assert run.status == 3, run.stderr
    assert run.quiet_s < 4 + SLACK_S
    report = run.report()
    assert report["stall"]["phase"] == "dist_init"
    advice = " ".join(a["text"] for a in report["advice"])
    assert "MASTER_ADDR" in advice and "MASTER_PORT" in advice
    assert any("init_process_group" in s for s in run.stacks())
    assert run.leftovers() == []


# --- which rank holds the job up ------------------------------------------------------------


# A pack's own `stacks:` rule names the job's loader (tried before the generic layer's).
LOADER_PACK = """\
pack: ranks-job
stacks:
  - id: ranks_job_loader
    match: '^load_batch \\(ranks_data_stall\\.py\\)'
    phase: data_load
    label: data loading
"""


def test_rank_stuck_in_data_loading_is_named_with_its_stack(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "pack.yaml").write_text(LOADER_PACK)
    run = hangwatch_run(tmp_path, "ranks_data_stall.py", "--stall-at", "9", stall="8s",
                        options=("--rules", "pack.yaml", *SLOW_START_OK), timeout=90)
    assert run.status == 3, run.stderr
    stall = run.report()["stall"]
    assert [(lag["rank"], lag["counter"]) for lag in stall["laggards"]] == [(2, 8)]
    assert stall["laggards"][0]["why"] == "at step 8 while ranks 0,1 reached step 11"
    assert [row["counter"] for row in stall["ranks"]] == [11, 11, 8]
    assert "laggard: rank 2" in run.stderr  # hangwatch speaks on stderr; the job on stdout
    assert run.leftovers() == []
    # rank 2's own process, told from its RANK, waits in load_batch: its stack is in the report
    stacks = run.stacks()
    processes = {p.get("rank"): p for p in run.report()["processes"] if p.get("stack")}
    assert "load_batch" in (processes.get("2") or {}).get("stack", ""), stacks
    markdown = next((tmp_path / "hangwatch-reports").glob("*/report.md")).read_text()
    section = markdown.split("### `rank 2", 1)[1].split("\n## ", 1)[0]
    assert "load_batch" in section
    # Its stack stands apart from the others': rank 2 is the one suspect, in data loading,
    # while ranks 0,1 wait in all_reduce; the frames' place is shown beside the log's.
    report = run.report()
    [suspect] = report["suspects"]
    assert (suspect["rank"], suspect["phase"]) == (2, "data_load"), report["stack_summary"]
    assert suspect["where"] == "load_batch (ranks_data_stall.py)"
    assert suspect["why"].startswith("rank 2 is in `load_batch` (data loading) while ranks "
                                     "0,1 wait in `all_reduce` (collective)")
    majority = report["stack_groups"][0]
    assert (majority["ranks"], majority["phase"]) == ([0, 1], "collective")
    assert report["frames_phase"] == "collective" and report["stall"]["phase"] == "train_loop"
    where = markdown.split("## Where the ranks are", 1)[1].split("\n## ", 1)[0]
    assert "| `all_reduce (torch/distributed/distributed_c10d.py)` | collective | 2 | 0,1 | 2 |" \
        in where
    assert "- suspect: rank 2 is in `load_batch` (data loading)" in where
    assert "suspect:           rank 2 is in `load_batch`" in run.stderr  # the plain output


def test_ranks_all_waiting_for_a_missing_rank_have_no_suspect(tmp_path):
    pytest.importorskip("torch")
    run = hangwatch_run(tmp_path, "ranks_data_stall.py", "--world", "3", "--skip-rank", "2",
                        stall="4s", timeout=60)
    assert run.status == 3, run.stderr
    run.stacks()
    report = run.report()
    assert report["suspects"] == []
    assert report["stack_summary"].startswith("ranks 0,1 stuck as a whole in "), report
    [ranks] = [g for g in report["stack_groups"] if g["ranks"] == [0, 1]]
    assert ranks["phase"] == "distributed_init"
    assert "## Where the ranks are" in next(
        (tmp_path / "hangwatch-reports").glob("*/report.md")).read_text()
    assert run.leftovers() == []


def test_ranks_all_waiting_at_one_step_are_stuck_as_a_whole(tmp_path):
    pytest.importorskip("torch")
    run = hangwatch_run(tmp_path, "ranks_data_stall.py", "--stall-at", "6", "--slow-rank",
                        "all", stall="8s", options=("--no-snapshot", *SLOW_START_OK),
                        timeout=90)
    assert run.status == 3, run.stderr
    stall = run.report()["stall"]
    assert stall["laggards"] == []
    assert stall["rank_summary"] == ("no rank stands out among 3 ranks (step 5, in train_loop): "
                                     "the job is stuck as a whole")
    assert run.leftovers() == []


def watch_rank_files(tmp_path: Path, jobs, *job_args: str,
                     options: tuple[str, ...] = ()) -> dict[str, Any]:
    """Start the job writing rank0.log..rank2.log, watch the three files with `hangwatch
    LOG...`, return its stall event (JSON Lines)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    pids = tmp_path / "pids"
    env = {"JOB_PIDS_FILE": str(pids)}
    jobs.start([sys.executable, str(JOBS / "ranks_data_stall.py"), "--log-dir", str(logs),
                *job_args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    child_env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT),
                                                              os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "hangwatch", *(str(logs / f"rank{r}.log") for r in range(3)),
         "--stall", "8s", *options, "--exit-on-stall", "--json", "--no-snapshot",
         "--report-dir", str(tmp_path / "reports")],
        capture_output=True, text=True, timeout=90, env=child_env, cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    [stall] = [e for e in events if e["event"] == "stall"]
    return stall


def test_separate_rank_logs_name_the_rank_behind(tmp_path, jobs):
    pytest.importorskip("torch")
    stall = watch_rank_files(tmp_path, jobs, "--stall-at", "9", options=SLOW_START_OK)
    [lag] = stall["laggards"]
    assert (lag["rank"], lag["counter"], Path(lag["source"]).name) == (2, 8, "rank2.log")
    assert stall["rank_summary"].startswith("held up by rank 2: at step 8 while ranks 0,1")


def test_separate_rank_logs_name_the_rank_never_started(tmp_path, jobs):
    pytest.importorskip("torch")
    stall = watch_rank_files(tmp_path, jobs, "--skip-rank", "1")
    assert [(lag["rank"], lag["why"]) for lag in stall["laggards"]] == [
        (1, "never logged (world size 3: world_size=3)")]


# --- plain Python hangs ---------------------------------------------------------------------


def test_multiprocessing_deadlock_is_caught_and_every_worker_ended(tmp_path):
    run = hangwatch_run(tmp_path, "mp_deadlock.py")
    assert run.status == 3, run.stderr
    assert run.quiet_s < 3 + SLACK_S
    assert "worker A: holding its first lock" in run.stdout
    workers = [s for s in run.stacks() if "worker (" in s and "mp_deadlock.py" in s]
    assert len(workers) == 2
    assert len(run.pids) == 3
    assert run.leftovers() == []


def test_waiting_for_workers_forever_is_noise_not_progress(tmp_path):
    run = hangwatch_run(tmp_path, "waiting_forever.py", stall="2s",
                        options=("--no-snapshot",))
    assert run.status == 3, run.stderr
    assert run.stdout.count("Waiting for 2 workers...") >= 4  # it never stopped printing
    assert "STALL" in run.stderr


def test_processes_that_leave_the_group_or_ignore_sigterm_do_not_survive(tmp_path):
    run = hangwatch_run(tmp_path, "escaping_tree.py", stall="2s", options=("--no-snapshot",))
    assert run.status == 3, run.stderr
    assert len(run.pids) == 4  # root, stubborn child, its setsid grandchild, the daemon
    assert run.leftovers() == []
    assert "SIGKILL to" in run.stderr


# --- jobs that must pass through untouched ------------------------------------------------


def test_healthy_job_printing_every_second_is_never_flagged(tmp_path):
    run = hangwatch_run(tmp_path, "healthy.py", "--seconds", "5", "--every", "1", stall="3s")
    assert run.status == 0, run.stderr
    assert "step 5 loss" in run.stdout
    assert "STALL" not in run.stderr
    assert not (tmp_path / "hangwatch-reports").exists()


@pytest.mark.parametrize(("args", "status"), [(("--exit", "7"), 7),
                                              (("--die-by", "SIGKILL"), 137)])
def test_the_jobs_own_exit_status_passes_through(tmp_path, args, status):
    run = hangwatch_run(tmp_path, "healthy.py", "--seconds", "0.2", *args)
    assert run.status == status, run.stderr
