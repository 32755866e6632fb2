"""Targets against a real receiver on 127.0.0.1 and real commands."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hangwatch.alerts.payload import Origin, recovered_payload, stall_payload
from hangwatch.alerts.targets import (
    AlertmanagerTarget,
    DeliveryError,
    TargetSpec,
    make_target,
    redact_url,
    specs_from_flags,
)
from hangwatch.core.events import StallEvent
from tests.fakes.receiver import Receiver, free_port

PAYLOAD = stall_payload(StallEvent("weight_sync", "Weight sync", None, 12.0, 10.0, time.time()),
                        Origin("job", "host"), "ep1")


def test_webhook_posts_the_payload_as_json():
    with Receiver() as receiver:
        make_target(TargetSpec("webhook", url=receiver.url("/T0/B0/XXXX"))).send(PAYLOAD)
        assert receiver.posts == [("/T0/B0/XXXX", PAYLOAD)]


@pytest.mark.parametrize(("status", "retry"), [(500, True), (503, True), (429, True),
                                               (400, False), (404, False)])
def test_http_errors_say_whether_a_retry_can_help(status, retry):
    with Receiver(status=status) as receiver, pytest.raises(DeliveryError) as caught:
        make_target(TargetSpec("webhook", url=receiver.url())).send(PAYLOAD)
    assert caught.value.retry is retry
    assert str(status) in str(caught.value)


def test_a_receiver_that_is_down_is_retried():
    url = f"http://127.0.0.1:{free_port()}/hook"
    with pytest.raises(DeliveryError) as caught:
        make_target(TargetSpec("webhook", url=url)).send(PAYLOAD)
    assert caught.value.retry


def test_a_receiver_that_never_answers_times_out():
    with Receiver(hang=True) as receiver:
        started = time.monotonic()
        with pytest.raises(DeliveryError) as caught:
            make_target(TargetSpec("webhook", url=receiver.url()), timeout=0.5).send(PAYLOAD)
        took = time.monotonic() - started
    assert caught.value.retry and 0.4 < took < 3.0


def test_alertmanager_posts_to_api_v2_alerts_and_keeps_firing_alerts_alive():
    with Receiver() as receiver:
        target = make_target(TargetSpec("alertmanager", url=receiver.url("/")))
        assert isinstance(target, AlertmanagerTarget)
        target.send(PAYLOAD)
        target.resend()  # still firing: posted again with a later endsAt
        target.send(recovered_payload(PAYLOAD, time.time()))
        target.resend()  # recovered: nothing left to keep alive
        posts = receiver.posts
    assert [path for path, _ in posts] == ["/api/v2/alerts"] * 3
    firing, again, resolved = (body[0] for _, body in posts)
    assert firing["labels"] == again["labels"] == resolved["labels"]
    assert again["endsAt"] >= firing["endsAt"]
    assert resolved["endsAt"] < firing["endsAt"]


def test_an_episode_restored_after_a_restart_is_kept_firing_in_alertmanager():
    with Receiver() as receiver:
        target = make_target(TargetSpec("alertmanager", url=receiver.url("/")))
        assert isinstance(target, AlertmanagerTarget)
        target.resend()
        assert receiver.posts == []
        target.keep_firing(PAYLOAD)
        target.resend()
        [(_, [alert])] = receiver.posts
    assert alert["labels"]["alertname"] == "HangwatchStall"
    assert alert["annotations"]["episode"] == "ep1"


RECORDER = textwrap.dedent("""
    import json, os, sys
    out = sys.argv[1]
    data = {"stdin": json.load(sys.stdin), "argv": sys.argv[1:],
            "env": {k: v for k, v in os.environ.items() if k.startswith("HANGWATCH_")}}
    with open(out, "w") as fh:
        json.dump(data, fh)
""")


def test_exec_gets_the_payload_on_stdin_and_in_env_and_log_text_never_in_argv(tmp_path: Path):
    script = tmp_path / "record.py"
    script.write_text(RECORDER)
    out = tmp_path / "got.json"
    hostile = {**PAYLOAD, "phase_title": "$(touch pwned); rm -rf / `id`"}
    [spec] = specs_from_flags([], [], [f"{sys.executable} {script} '{out}'"])
    make_target(spec).send(hostile)
    got = json.loads(out.read_text())
    assert got["stdin"] == hostile
    assert got["argv"] == [str(out)]
    assert got["env"]["HANGWATCH_EVENT"] == "stall"
    assert got["env"]["HANGWATCH_PHASE_TITLE"] == "$(touch pwned); rm -rf / `id`"
    assert not (tmp_path / "pwned").exists()


def test_a_failing_command_is_a_retryable_error_with_its_stderr():
    spec = TargetSpec("exec", argv=(sys.executable, "-c",
                                    "import sys; sys.exit('receiver said no')"))
    with pytest.raises(DeliveryError) as caught:
        make_target(spec).send(PAYLOAD)
    assert caught.value.retry and "receiver said no" in str(caught.value)


HANGER = textwrap.dedent("""
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with open(sys.argv[1], "w") as fh:
        fh.write(str(child.pid))
    time.sleep(60)
""")


def test_a_hanging_command_is_killed_with_its_children_at_the_timeout(tmp_path: Path):
    script = tmp_path / "hang.py"
    script.write_text(HANGER)
    pid_file = tmp_path / "child.pid"
    target = make_target(TargetSpec("exec", argv=(sys.executable, str(script), str(pid_file))),
                         timeout=1.0)
    started = time.monotonic()
    with pytest.raises(DeliveryError) as caught:
        target.send(PAYLOAD)
    assert time.monotonic() - started < 5
    assert "killed" in str(caught.value)
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for init to reap it is dead too
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.parametrize(("url", "shown"), [
    ("https://hooks.slack.com/services/T000/B000/XXXXSECRET", "https://hooks.slack.com/<redacted>"),
    ("https://example.com/hook?token=SECRET", "https://example.com/<redacted>"),
    ("https://user:SECRET@example.com:8443/", "https://example.com:8443"),
    ("http://alertmanager:9093", "http://alertmanager:9093"),
    ("http://[::1]:9093/", "http://[::1]:9093"),
])
def test_urls_are_shown_without_their_tokens(url, shown):
    assert redact_url(url) == shown
    assert "SECRET" not in TargetSpec("webhook", url=url).display
    assert "SECRET" not in TargetSpec("webhook", url=url).key
    assert "SECRET" not in TargetSpec("webhook", url=url).label


def test_bad_flags_are_refused_without_showing_the_token():
    with pytest.raises(ValueError, match="http:// or https://") as caught:
        specs_from_flags(["ftp://example.com/SECRET"], [], [])
    assert "SECRET" not in str(caught.value)
    with pytest.raises(ValueError, match="--alert-exec"):
        specs_from_flags([], [], ["notify 'unclosed"])
    assert TargetSpec("exec", argv=("notify", "--token", "SECRET")).display == \
        "exec notify --token '<redacted>'"
