"""`hangwatch run`: exit statuses, the CI outputs, and signals sent to hangwatch itself."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import psutil
import pytest

from hangwatch.cli import main

ROOT = Path(__file__).resolve().parents[2]


def write_job(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(body))
    return script


def run(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(["run", "--log", str(tmp_path / "job.log"), "--report-dir",
                   str(tmp_path / "reports"), *args], out, err)
    return status, out.getvalue(), err.getvalue()


STALLS = """
    import os, sys, time
    open(sys.argv[1], "w").write(str(os.getpid()))
    print("step 1 loss 0.9")
    time.sleep(60)
"""


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("argv", [[], ["--"]])
def test_no_command_is_a_usage_error(tmp_path, argv):
    status, _, err = run(tmp_path, *argv)
    assert status == 2
    assert "no command given" in err


def test_a_command_that_is_not_found_exits_127_with_a_message(tmp_path):
    status, _, err = run(tmp_path, "--", "no-such-command-hangwatch")
    assert status == 127
    assert "hangwatch: command not found: no-such-command-hangwatch" in err


def test_a_bad_rule_file_is_reported_before_the_job_starts(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("pack: bad\nphases:\n  - id: Bad Id\n    start: 'x'\n")
    marker = tmp_path / "started"
    status, _, err = run(tmp_path, "--rules", str(bad), "--", sys.executable, "-c",
                         f"open({str(marker)!r}, 'w')")
    assert status == 2
    assert "bad.yaml" in err
    assert not marker.exists()


def test_the_jobs_status_output_and_log_pass_through_and_check_reads_the_log(tmp_path):
    job = write_job(tmp_path, """
        import sys
        print("[rank0] calling init_process_group(backend=gloo, world_size=2)")
        sys.stderr.write("a warning\\n")  # one write: print() may send its newline apart
        print("step 1 loss 0.5")
        raise SystemExit(7)
    """)
    status, out, err = run(tmp_path, "--stall", "30s", "--", sys.executable, str(job))
    assert status == 7
    assert "step 1 loss 0.5\n" in out
    assert "a warning\n" in err
    assert "STALL" not in err
    log = (tmp_path / "job.log").read_text().splitlines()
    # Two pipes carry no order between them: stdout's own order is kept, stderr joins it.
    assert [line for line in log if line != "a warning"] == [
        "[rank0] calling init_process_group(backend=gloo, world_size=2)", "step 1 loss 0.5"]
    assert "a warning" in log
    check_out = io.StringIO()
    assert main(["check", "--json", str(tmp_path / "job.log")], check_out, io.StringIO()) == 0
    assert sum(json.loads(check_out.getvalue())["lines"].values()) == 3


def test_a_stall_exits_3_reports_and_ends_the_job(tmp_path):
    pid_file = tmp_path / "pid"
    job = write_job(tmp_path, STALLS)
    started = time.monotonic()
    status, out, err = run(tmp_path, "--stall", "1s", "--grace", "0.5s", "--no-snapshot",
                           "--", sys.executable, str(job), str(pid_file))
    assert status == 3
    assert time.monotonic() - started < 8
    assert "step 1 loss 0.9" in out
    assert "STALL: no progress for 1s" in err
    assert "hangwatch: ended the job: SIGTERM to 1 process(es)" in err
    assert gone(int(pid_file.read_text()))
    assert list((tmp_path / "reports").iterdir())


def test_junit_fails_on_a_stall_and_passes_otherwise(tmp_path):
    job = write_job(tmp_path, STALLS)
    xml = tmp_path / "junit" / "hangwatch.xml"
    status, _, _ = run(tmp_path, "--stall", "1s", "--grace", "0.5s", "--no-snapshot",
                       "--junit", str(xml), "--", sys.executable, str(job),
                       str(tmp_path / "pid"))
    assert status == 3
    suite = ET.parse(xml).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    failure = suite.find("testcase/failure")
    assert failure is not None
    assert failure.get("message", "").startswith(
        "stalled in Training loop (train_loop): no progress")
    assert "step 1 loss 0.9" in (suite.findtext("testcase/system-out") or "")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["exit_status"] == "3"

    status, _, _ = run(tmp_path, "--junit", str(xml), "--", sys.executable, "-c", "print(1)")
    assert status == 0
    suite = ET.parse(xml).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "0"
    assert suite.find("testcase/failure") is None


def test_under_github_actions_a_stall_is_annotated_and_summarized(tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    job = write_job(tmp_path, """
        import time
        print("Starting training loop")
        time.sleep(60)
    """)
    status, out, _ = run(tmp_path, "--stall", "1s", "--grace", "0.5s", "--no-snapshot", "--",
                         sys.executable, str(job))
    assert status == 3
    [annotation] = [line for line in out.splitlines() if line.startswith("::error ")]
    assert annotation.startswith("::error title=hangwatch%3A stall in Training loop (train_loop)::")
    assert "No progress for 1s" in annotation
    text = summary.read_text()
    assert text.startswith("earlier step\n## hangwatch: stalled in Training loop (train_loop)")
    assert "### Timeline" in text
    assert "### Advice" in text


def test_without_github_actions_there_is_no_annotation(tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    status, out, _ = run(tmp_path, "--stall", "1s", "--grace", "0.5s", "--no-snapshot", "--",
                         sys.executable, str(write_job(tmp_path, STALLS)), str(tmp_path / "p"))
    assert status == 3
    assert "::error" not in out


TQDM_THEN_STALLS = """
    import sys, time
    print("step:1 - loss:0.5", flush=True)
    sys.stderr.write("Training:  10%|#  | 1/10 [00:01<00:09, 1.00it/s]")
    sys.stderr.flush()
    time.sleep(60)
"""


def test_json_events_start_on_a_line_of_their_own_after_a_tqdm_bar(tmp_path):
    status, _, err = run(tmp_path, "--json", "--stall", "1s", "--grace", "0.5s",
                         "--no-snapshot", "--", sys.executable,
                         str(write_job(tmp_path, TQDM_THEN_STALLS)))
    assert status == 3
    # The phase event and the bar race to stderr; whichever comes first, neither is glued
    # to the other: every line is the bar alone, one whole JSON event, or hangwatch's own.
    bar = "Training:  10%|#  | 1/10 [00:01<00:09, 1.00it/s]"
    lines = err.splitlines()
    assert lines.count(bar) == 1
    assert all(line == bar or line.startswith(("{", "hangwatch: ")) for line in lines), lines
    events = [json.loads(line) for line in lines if line.startswith("{")]
    assert [e["event"] for e in events] == ["phase", "stall"]


def test_events_file_holds_the_events_and_the_jobs_streams_stay_the_jobs(tmp_path):
    events = tmp_path / "events.jsonl"
    status, out, err = run(tmp_path, "--events", str(events), "--stall", "1s", "--grace",
                           "0.5s", "--no-snapshot", "--", sys.executable,
                           str(write_job(tmp_path, TQDM_THEN_STALLS)))
    assert status == 3
    assert out == "step:1 - loss:0.5\n"
    assert "{" not in err  # plain lines for people there; the JSON went to the file
    stall = [json.loads(line) for line in events.read_text().splitlines()][-1]
    assert stall["event"] == "stall"
    assert os.path.isabs(stall["report"]) and os.path.isdir(stall["report"])


def test_an_events_file_that_cannot_be_written_is_a_usage_error(tmp_path):
    status, _, err = run(tmp_path, "--events", str(tmp_path / "no" / "such" / "dir.jsonl"),
                         "--", sys.executable, "-c", "pass")
    assert status == 2
    assert "--events: cannot write" in err


# --- signals sent to hangwatch: a real hangwatch process --------------------------------

HANDLES_SIGNALS = """
    import os, signal, sys, time
    open(sys.argv[1], "w").write(str(os.getpid()))
    def bye(signum, frame):
        print(f"job got {signal.Signals(signum).name}", flush=True)
        sys.exit(1)
    signal.signal(signal.SIGINT, bye)
    if sys.argv[2] == "ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ready", flush=True)
    time.sleep(60)
"""


def start_hangwatch(tmp_path: Path, mode: str) -> tuple[subprocess.Popen[str], Path]:
    job = write_job(tmp_path, HANDLES_SIGNALS)
    pid_file = tmp_path / "pid"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT),
                                                        os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "hangwatch", "run", "--stall", "60s", "--grace", "1s",
         "--log", str(tmp_path / "job.log"), "--", sys.executable, str(job), str(pid_file),
         mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    return proc, pid_file


def test_ctrl_c_is_passed_to_the_job_and_hangwatch_exits_130(tmp_path):
    proc, pid_file = start_hangwatch(tmp_path, "default")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert "job got SIGINT" in out
    assert gone(int(pid_file.read_text()))


def test_sigterm_is_passed_on_and_a_job_ignoring_it_is_killed_after_the_grace(tmp_path):
    proc, pid_file = start_hangwatch(tmp_path, "ignore-term")
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 143, err
    assert 1.0 <= time.monotonic() - started < 10
    assert "SIGKILL to 1 still running" in err
    assert gone(int(pid_file.read_text()))


def test_signal_that_comes_while_the_job_starts_reaches_the_job_once_it_exists(tmp_path):
    # Handlers go in before the job starts: a Ctrl-C in that window is neither lost nor the
    # end of hangwatch alone (which would leave the job running in its own process group).
    from hangwatch.commands.run import Interrupts
    from hangwatch.jobs.job import Job

    script = write_job(tmp_path, HANDLES_SIGNALS)
    found = signal.getsignal(signal.SIGINT)  # SIG_IGN when started with `cmd &`, in CI
    interrupts = Interrupts(grace=1.0)
    interrupts.install()
    job = None
    try:
        os.kill(os.getpid(), signal.SIGINT)  # handled here, in the main thread, at once
        assert interrupts.received == signal.SIGINT
        job = Job.start([sys.executable, str(script), str(tmp_path / "pid"), "default"],
                        log_path=tmp_path / "job.log", echo=lambda stream, data: None,
                        on_lines=lambda data: None)
        interrupts.attach(job)
        assert job.wait(10) is not None  # it would sleep 60 s without the signal
    finally:
        interrupts.restore()
        if job is not None:
            job.stop(0.5)
    assert signal.getsignal(signal.SIGINT) is found


def the_stall(err: str) -> dict:
    """The one stall event among hangwatch's JSON lines on stderr."""
    [stall] = [e for e in (json.loads(line) for line in err.splitlines()
                           if line.startswith("{")) if e["event"] == "stall"]
    return stall


BAR_ON_STDERR_THEN_STALLS = """
    import sys, time
    sys.stderr.write("\\rGenerating train split: 0 examples [00:00, ? examples/s]")
    sys.stderr.flush()
    time.sleep(60)
"""


def stalled_json_run(tmp_path, job: str) -> tuple[int, str]:
    status, _, err = run(tmp_path, "--json", "--stall", "2s", "--grace", "0.5s",
                         "--no-snapshot", "--", sys.executable, str(write_job(tmp_path, job)))
    return status, err


def test_a_job_stuck_under_its_unfinished_progress_bar_is_placed_in_its_phase(tmp_path):
    status, err = stalled_json_run(tmp_path, BAR_ON_STDERR_THEN_STALLS)
    assert status == 3
    stall = the_stall(err)
    assert stall["phase"] == "data_load"
    assert "Generating train split: 0 examples" in (tmp_path / "job.log").read_text()


PHASE_THEN_EXITS = """
    import time
    print("[ROLLOUT] init_model START", flush=True)
    time.sleep(0.3)
    print("[ROLLOUT] init_model DONE", flush=True)
"""


def test_history_learns_each_runs_phase_durations_per_job(tmp_path):
    history = tmp_path / "history.json"
    job = str(write_job(tmp_path, PHASE_THEN_EXITS))
    for _ in range(2):
        status, _, err = run(tmp_path, "--history", str(history), "--name", "gkd", "--",
                             sys.executable, job)
        assert status == 0, err
    data = json.loads(history.read_text())
    [first, second] = data["jobs"]["gkd"]["durations"]["rollout_init"]
    assert 0.25 < first < 5 and 0.25 < second < 5


def test_a_history_file_that_is_not_one_is_a_usage_error(tmp_path):
    history = tmp_path / "history.json"
    history.write_text("[1, 2]")
    status, _, err = run(tmp_path, "--history", str(history), "--", sys.executable, "-c", "0")
    assert status == 2 and "not a hangwatch history file" in err


WAITS_FOR_A_RANK = """
    import time
    print("step 1 loss 0.9", flush=True)
    for attempt in range(1, 400):
        print(f"still waiting for rank 3 (attempt {attempt})", flush=True)
        time.sleep(0.1)
"""


def test_a_job_printing_a_wait_loop_no_pack_knows_is_a_stall_that_names_the_line(tmp_path):
    status, err = stalled_json_run(tmp_path, WAITS_FOR_A_RANK)
    assert status == 3
    stall = the_stall(err)
    [wait] = stall["waits"][:1]
    assert wait["template"] == "still waiting for rank <n> (attempt <n>)"
    assert wait["count"] >= 10
    assert any("repeated" in because for because in stall["evidence"])
