"""`hangwatch serve` as systemd runs it: a real process, a datagram socket for systemd, logs
growing on disk, signals, SIGKILL and restarts."""

from __future__ import annotations

import itertools
import os
import signal
import textwrap
import time
from pathlib import Path

import pytest

from tests.service.serving import Systemd, saved, wait_until

START = "LOAD checkpoint START\n"
DONE = "LOAD checkpoint DONE\n"
PACK = """\
pack: serve-test
phases:
  - id: load
    start: 'LOAD \\w+ START'
    done: 'LOAD \\w+ DONE'
"""


@pytest.fixture
def systemd():
    notify = Systemd()
    yield notify
    notify.close()


def config(folder: Path, watches: str, name: str = "serve.yaml") -> Path:
    (folder / "pack.yaml").write_text(PACK)
    path = folder / name
    path.write_text(f"state_dir: state\nwatches:\n{textwrap.indent(watches, '  ')}")
    return path


def watch(name: str, logs: str, stall: str = "1m") -> str:
    return (f"- name: {name}\n  logs: [{logs}]\n  stall: {stall}\n  snapshot: false\n"
            f"  report_dir: reports/{name}\n  rules: [pack.yaml]\n")


def is_phase(watch: str, phase: str, state: str):
    return lambda e: (e["event"] == "phase" and e["watch"] == watch and e["phase"] == phase
                      and e["state"] == state)


def test_ready_once_logs_are_read_then_watchdog_pings_from_a_turning_loop(
        tmp_path, systemd, serving):
    (tmp_path / "train.log").write_text(START)
    serve = serving(tmp_path, ["--config", str(config(tmp_path, watch("w1", "train.log")))],
                    systemd, watchdog_usec=300_000)
    ready = systemd.wait_for("READY=1")
    # Catch-up is done before READY=1: the log's line has been handled and reported.
    assert any(is_phase("w1", "load", "started")(e) for e in serve.events())
    systemd.receive_for(1.5)
    pings = [at for at, fields in systemd.messages if "WATCHDOG=1" in fields and at >= ready]
    assert len(pings) >= 4  # every 0.15 s at most for WATCHDOG_USEC=0.3 s
    assert max(b - a for a, b in itertools.pairwise(pings)) < 0.3
    assert any(s.startswith("STATUS=w1: load, idle") for s in systemd.fields("STATUS="))


def test_sigterm_exits_0_within_2s_saying_stopping(tmp_path, serving):
    notify = Systemd(abstract=False)  # the path form of $NOTIFY_SOCKET
    try:
        (tmp_path / "train.log").write_text(START)
        serve = serving(tmp_path, [str(tmp_path / "train.log"), "--stall", "1m",
                                   "--no-snapshot", "--state-dir", str(tmp_path / "state")],
                        notify)
        notify.wait_for("READY=1")
        sent = time.monotonic()
        serve.proc.send_signal(signal.SIGTERM)
        assert serve.proc.wait(timeout=5) == 0, serve.stderr()
        assert time.monotonic() - sent < 2.0
        notify.wait_for("STOPPING=1", timeout=1)
        assert saved(tmp_path / "state", "main")["files"]  # the offsets were kept on the way out
    finally:
        notify.close()


def test_rank_log_created_after_start_is_followed(tmp_path, systemd, serving):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rank0.log").write_text(START)
    serve = serving(tmp_path, ["--config", str(config(tmp_path, watch("job", "logs/rank*.log")))],
                    systemd)
    systemd.wait_for("READY=1")
    (logs / "rank1.log").write_text("[ROLLOUT] init_model START\n")
    event = serve.wait_event(is_phase("job", "rollout_init", "started"), timeout=10)
    assert event["source"] == str(logs / "rank1.log")


def test_sigkill_and_restart_neither_replay_nor_report_the_episode_again_but_read_new_lines(
        tmp_path, systemd, serving):
    log = tmp_path / "train.log"
    log.write_text(START)
    args = ["--config", str(config(tmp_path, watch("w1", "train.log", stall="1s")))]
    state = tmp_path / "state"

    first = serving(tmp_path, args, systemd)
    first.wait_event(lambda e: e["event"] == "stall", timeout=20)
    wait_until(lambda: (saved(state, "w1") or {}).get("episode", {}) is not None
               and saved(state, "w1")["episode"]["reported"], what="the episode saved")
    episode = saved(state, "w1")["episode"]["id"]
    first.kill()  # SIGKILL: nothing written on the way out

    second = serving(tmp_path, args, systemd)
    systemd.messages.clear()
    systemd.wait_for("READY=1")
    time.sleep(2.5)  # more than the 1 s threshold: a stall not restored would fire again
    assert [e for e in second.events() if e["event"] in ("stall", "phase")] == []
    assert saved(state, "w1")["episode"]["id"] == episode
    second.kill()

    with log.open("a") as f:  # written while hangwatch is down
        f.write(DONE)
    third = serving(tmp_path, args, systemd)
    done = third.wait_event(is_phase("w1", "load", "completed"))
    assert done["line"] == 2
    third.wait_event(lambda e: e["event"] == "recovered")
    assert not any(is_phase("w1", "load", "started")(e) for e in third.events())
    # closed: gone, or (on a loaded machine, the log quiet again past the 1 s threshold) a
    # new episode in its place
    wait_until(lambda: (saved(state, "w1")["episode"] or {}).get("id") != episode,
               what="the episode closed")


def test_sighup_reloads_a_good_config_keeping_offsets_and_refuses_a_bad_one(
        tmp_path, systemd, serving):
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text(START)
    b.write_text("[ROLLOUT] init_model START\n")
    path = config(tmp_path, watch("w1", "a.log"))
    serve = serving(tmp_path, ["--config", str(path)], systemd)
    systemd.wait_for("READY=1")
    systemd.messages.clear()

    config(tmp_path, watch("w1", "a.log") + watch("w2", "b.log"))
    serve.proc.send_signal(signal.SIGHUP)
    serve.wait_event(is_phase("w2", "rollout_init", "started"))
    systemd.wait_for("RELOADING=1")
    systemd.wait_for("READY=1")
    with a.open("a") as f:
        f.write(DONE)
    serve.wait_event(is_phase("w1", "load", "completed"))
    assert sum(is_phase("w1", "load", "started")(e) for e in serve.events()) == 1

    path.write_text("state_dir: state\nwatches:\n  - name: w1\n    stall: 10 parsecs\n")
    serve.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: "reload refused" in serve.stderr(), what="the reload refused")
    assert f"{path}:4: bad duration in `stall`" in serve.stderr()
    assert f"{path}:3: missing required key 'logs'" in serve.stderr()
    with b.open("a") as f:
        f.write("[ROLLOUT] init_model DONE\n")
    serve.wait_event(is_phase("w2", "rollout_init", "completed"))  # the old config goes on
    assert serve.proc.poll() is None
    os.kill(serve.proc.pid, signal.SIGTERM)
    assert serve.proc.wait(timeout=5) == 0
