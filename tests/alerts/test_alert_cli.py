"""Alerts from real `hangwatch watch`, `run` and `alert-test` processes to a real receiver."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import pytest

from tests.fakes.hangwatch_proc import Hangwatch, hangwatch
from tests.fakes.receiver import Receiver, free_port

STALLING = "[SYNC] Starting weight synchronization\n"
TOKEN = "S3CR3TT0K3N"


def append(log: Path, text: str) -> float:
    with log.open("a") as fh:
        fh.write(text)
    return time.monotonic()


def watch(log: Path, tmp_path: Path, *flags: str) -> Hangwatch:
    return Hangwatch("watch", str(log), "--stall", "1s", "--json", "--no-snapshot",
                     "--report-dir", str(tmp_path / "reports"),
                     "--state-dir", str(tmp_path / "state"), *flags)


def test_watch_sends_one_stall_alert_per_episode_and_a_recovered(tmp_path: Path):
    log = tmp_path / "train.log"
    append(log, STALLING)
    with Receiver() as receiver:
        hw = watch(log, tmp_path, "--webhook", receiver.url(), "--name", "gkd")
        try:
            receiver.wait_for(1)
            append(log, "step 1\n")
            receiver.wait_for(3)  # recovered, then the second episode's stall
            append(log, "step 2\n")
            receiver.wait_for(4)
        finally:
            assert hw.stop() == 0, hw.output()
        alerts = receiver.bodies()
    assert [a["event"] for a in alerts] == ["stall", "recovered", "stall", "recovered"]
    assert alerts[0]["episode"] == alerts[1]["episode"] != alerts[2]["episode"]
    assert alerts[2]["episode"] == alerts[3]["episode"]
    assert alerts[0]["watch"] == "gkd" and alerts[0]["phase"] == "weight_sync"
    assert Path(alerts[0]["report"]).is_dir()


def test_a_receiver_that_never_answers_does_not_delay_the_stall_event(tmp_path: Path):
    """The alert of the first stall holds the sender in a 5 s request; both stall events
    still come on time: at most 1 s after the threshold (measured: 17-25 ms, as without a
    target)."""
    log = tmp_path / "train.log"
    with Receiver(hang=True) as receiver:
        written = append(log, STALLING)
        hw = watch(log, tmp_path, "--webhook", receiver.url())
        try:
            hw.next_event("stall")
            receiver.wait_for(1)  # the sender is now inside the hanging request
            written = append(log, "step 1\n")
            hw.next_event("recovered")
            second, _ = hw.next_event("stall")
            assert len(receiver.posts) == 1  # still hanging on the first alert
        finally:
            hw.stop(signal.SIGKILL)
    delay = second - (written + 1.0)
    print(f"stall event delay behind the threshold, receiver hanging: {delay * 1000:.0f} ms")
    assert delay < 1.0


def test_alerts_spooled_before_a_sigkill_are_delivered_in_order_after_the_restart(
        tmp_path: Path):
    log = tmp_path / "train.log"
    port = free_port()
    url = f"http://127.0.0.1:{port}/services/T000/B000/{TOKEN}"
    append(log, STALLING)
    hw = watch(log, tmp_path, "--webhook", url)
    try:
        hw.next_event("stall")
        append(log, "step 1\n")
        hw.next_event("recovered")
        _, stall = hw.next_event("stall")
        spool = next((tmp_path / "state" / "alert-spool").iterdir())
        deadline = time.monotonic() + 10
        while len(list(spool.glob("*.json"))) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(list(spool.glob("*.json"))) == 3
    finally:
        hw.stop(signal.SIGKILL)
    assert TOKEN not in hw.output()  # the failing sends were logged, the token hidden
    assert "127.0.0.1:" in "".join(hw.stderr)
    with Receiver(port) as receiver:
        again = Hangwatch("watch", str(log), "--stall", "60s", "--json", "--no-snapshot",
                          "--state-dir", str(tmp_path / "state"), "--webhook", url)
        try:
            alerts = receiver.wait_for(3)
        finally:
            again.stop()
    assert [a["event"] for a in alerts] == ["stall", "recovered", "stall"]
    assert alerts[2]["idle_s"] == stall["idle_s"]
    assert not list(spool.glob("*.json"))


def test_run_delivers_the_stall_alert_before_it_exits_3(tmp_path: Path):
    job = "print('[SYNC] Starting weight synchronization', flush=True); import time; " \
          "time.sleep(30)"
    with Receiver() as receiver:
        result = hangwatch("run", "--stall", "1s", "--no-snapshot", "--name", "ci-job",
                           "--log", str(tmp_path / "job.log"),
                           "--report-dir", str(tmp_path / "r"), "--state-dir", str(tmp_path / "s"),
                           "--alertmanager", receiver.url(""), "--", sys.executable, "-c", job)
        posts = receiver.posts
    assert result.returncode == 3, result.stderr
    [(path, body)] = posts
    assert path == "/api/v2/alerts"
    assert body[0]["labels"] == {"alertname": "HangwatchStall", "job": "ci-job",
                                 "host": body[0]["labels"]["host"], "phase": "weight_sync"}


def test_alert_test_sends_a_sample_and_says_so(tmp_path: Path):
    with Receiver() as receiver:
        result = hangwatch("alert-test", "--webhook", receiver.url(f"/hook/{TOKEN}"))
        [sample] = receiver.bodies()
    assert result.returncode == 0, result.stderr
    assert sample["event"] == "stall" and "test alert" in sample["advice"][0]
    assert "sent" in result.stdout and TOKEN not in result.stdout


def test_alert_test_fails_with_status_1_when_a_target_cannot_be_reached(tmp_path: Path):
    result = hangwatch("alert-test", "--json", "--webhook",
                       f"http://127.0.0.1:{free_port()}/hook/{TOKEN}")
    assert result.returncode == 1
    [report] = [json.loads(line) for line in result.stdout.splitlines()]
    assert report["ok"] is False and "cannot reach" in report["error"]
    assert TOKEN not in result.stdout + result.stderr


def test_alert_test_reads_the_alerts_key_of_a_service_config(tmp_path: Path):
    config = tmp_path / "hangwatch.yaml"
    with Receiver() as receiver:
        config.write_text(f"state_dir: /tmp/x\nalerts:\n  - webhook: {receiver.url()}\n"
                          f"  - exec: [{sys.executable!r}, -c, 'import sys; sys.stdin.read()']\n"
                          "watches: []\n")
        result = hangwatch("alert-test", "--config", str(config))
        assert len(receiver.bodies()) == 1
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("sent") == 2


@pytest.mark.parametrize(("alerts", "line", "message"), [
    ("alerts:\n  - webhook: https://x/y\n  - slack: https://x/y\n", 3, "unknown alert target"),
    ("alerts:\n  - {webhook: https://x/y, exec: [a]}\n", 2, "each alert target"),
    ("alerts:\n  - webhook: ftp://x/" + TOKEN + "\n", 2, "http:// or https://"),
    ("alerts:\n  - exec: {a: b}\n", 2, "`exec` takes a command"),
    ("alerts: https://x/y\n", 1, "must be a list"),
    ("watches: []\n", 1, "no `alerts:` key"),
    ("alerts:\n  - webhook: [unclosed\n", 3, "invalid YAML"),
])
def test_a_bad_alerts_config_is_exit_2_with_file_and_line(tmp_path: Path, alerts, line, message):
    config = tmp_path / "hangwatch.yaml"
    config.write_text(alerts)
    result = hangwatch("alert-test", "--config", str(config))
    assert result.returncode == 2
    assert f"{config}:{line}: " in result.stderr and message in result.stderr
    assert TOKEN not in result.stderr


def test_bad_alert_flags_are_exit_2_before_anything_runs(tmp_path: Path):
    result = hangwatch("run", "--webhook", f"hooks.example.com/{TOKEN}", "--", "true")
    assert result.returncode == 2 and "--webhook" in result.stderr
    assert TOKEN not in result.stderr
    result = hangwatch("watch", str(tmp_path / "x.log"), "--metrics", "localhost:http")
    assert result.returncode == 2 and "--metrics" in result.stderr
