"""Metrics and /healthz over real HTTP: from a real `watch` process, and from a loop that
really stops turning."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from hangwatch.core.clock import SystemClock
from hangwatch.core.engine import Engine
from hangwatch.metrics.listen import parse_listen
from hangwatch.metrics.server import NAMES, MetricsHub, MetricsServer
from hangwatch.packs.load import load_rule_set
from hangwatch.session.session import Session, SessionOptions
from hangwatch.sources.feed import Block
from tests.fakes.hangwatch_proc import Hangwatch
from tests.fakes.receiver import Receiver, free_port

NCCL_TIMEOUT = ("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
                "OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.\n")


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, text = get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def wait_until(check, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.05)


def test_metrics_scraped_during_a_stall_and_after_recovery(tmp_path: Path):
    log = tmp_path / "train.log"
    log.write_text("[SYNC] Starting weight synchronization\n" + NCCL_TIMEOUT)
    port = free_port()
    with Receiver() as receiver:
        hw = Hangwatch("watch", str(log), "--stall", "1s", "--json", "--no-snapshot",
                       "--report-dir", str(tmp_path / "r"), "--state-dir", str(tmp_path / "s"),
                       "--metrics", f"127.0.0.1:{port}", "--name", "gkd",
                       "--webhook", receiver.url())
        try:
            hw.next_event("stall")
            receiver.wait_for(1)
            stalled = wait_until(lambda: (s := scrape(port)) and
                                 value(s, "hangwatch_alerts_total", target="webhook:127.0.0.1",
                                       result="delivered") == 1 and s)
            with log.open("a") as fh:
                fh.write("step 1\n")
            hw.next_event("recovered")
            recovered = wait_until(lambda: (s := scrape(port)) and
                                   value(s, "hangwatch_stalled", watch="gkd") == 0 and s)
            health = get(f"http://127.0.0.1:{port}/healthz")
        finally:
            assert hw.stop() == 0, hw.output()
    watch, logl = {"watch": "gkd"}, {"watch": "gkd", "log": str(log)}
    assert value(stalled, "hangwatch_stalled", **watch) == 1
    assert value(stalled, "hangwatch_seconds_since_progress", **logl) >= 1.0
    assert value(stalled, "hangwatch_phase", phase="weight_sync", **watch) == 1
    so_far = value(stalled, "hangwatch_phase_duration_seconds", phase="weight_sync", **watch)
    assert so_far > 0  # since the line was read: catch-up lines carry the time they were read
    assert value(stalled, "hangwatch_lines_total", **logl) == 2
    assert value(stalled, "hangwatch_signals_total", signal="nccl_collective_timeout",
                 severity="error", **watch) == 1
    assert value(stalled, "hangwatch_stalls_total", **watch) == 1
    assert value(stalled, "hangwatch_log_readable", **logl) == 1
    assert value(stalled, "hangwatch_alert_failures_total", target="webhook:127.0.0.1") == 0
    assert value(stalled, "hangwatch_alert_spool", target="webhook:127.0.0.1") == 0
    assert abs(value(stalled, "hangwatch_loop_last_timestamp_seconds") - time.time()) < 30
    exported = {n for n, _ in stalled}
    # Per-rank series come only from a log that names ranks: tests/metrics/test_rank_metrics.py
    expected = set(NAMES) - {"hangwatch_rank_seconds_since_progress"}
    assert expected <= exported, expected - exported
    assert value(recovered, "hangwatch_seconds_since_progress", **logl) < 1.0
    assert value(recovered, "hangwatch_lines_total", **logl) == 3
    assert value(recovered, "hangwatch_stalls_total", **watch) == 1
    assert value(recovered, "hangwatch_phase_duration_seconds", phase="weight_sync",
                 **watch) > so_far  # still in progress: it grows
    assert health == (200, "ok\n")
    # Labels are names, paths and rule ids: no text of the log reached one.
    for _, labels in recovered:
        assert not any("Watchdog" in v or "SeqNum" in v for _, v in labels)


class Blocking:
    """A reporter that blocks the loop on a stall until released: a wedged output."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def event(self, event) -> None:
        if type(event).__name__ == "StallEvent":
            self.release.wait(30)

    def notice(self, notice) -> None: ...
    def incident(self, incident) -> None: ...
    def refresh(self, view) -> None: ...
    def close(self) -> None: ...


def test_healthz_fails_once_the_loop_has_not_turned_for_three_periods(tmp_path: Path):
    hub = MetricsHub()
    metrics = hub.watch("job", ["train.log"], period_s=0.2)
    server = MetricsServer(hub, "127.0.0.1", 0)
    blocking = Blocking()
    engine = Engine(load_rule_set(), default_stall=1.0, clock=SystemClock())
    session = Session(engine, [blocking, metrics],
                      SessionOptions(report_dir=tmp_path, turn_s=0.2), ["train.log"],
                      on_turn=[metrics.turned])
    stop = threading.Event()
    loop = threading.Thread(target=session.run, args=(stop.is_set,), daemon=True)
    url = f"http://127.0.0.1:{server.port}/healthz"
    try:
        loop.start()
        session.queue.put(Block("train.log", b"[SYNC] Starting weight synchronization\n"))
        time.sleep(0.7)  # idle, yet turning every 0.2 s
        assert get(url) == (200, "ok\n")
        status, text = wait_until(lambda: (r := get(url))[0] == 503 and r, timeout=5)
        assert status == 503 and "job: the loop has not turned" in text
        blocking.release.set()
        assert wait_until(lambda: get(url)[0] == 200, timeout=5)
    finally:
        blocking.release.set()
        stop.set()
        loop.join(5)
        server.close()


def test_listen_address_defaults_to_loopback():
    assert parse_listen("9464") == ("127.0.0.1", 9464)
    assert parse_listen("0.0.0.0:9464") == ("0.0.0.0", 9464)
    assert parse_listen("[::1]:9464") == ("::1", 9464)
    for bad in (":9464", "localhost:http", "99999"):
        with pytest.raises(ValueError):
            parse_listen(bad)


def test_a_port_in_use_is_a_clear_error():
    from hangwatch.errors import HangwatchError

    server = MetricsServer(MetricsHub(), "127.0.0.1", 0)
    try:
        with pytest.raises(HangwatchError, match="cannot listen"):
            MetricsServer(MetricsHub(), "127.0.0.1", server.port)
        assert get(f"http://127.0.0.1:{server.port}/nope")[0] == 404
    finally:
        server.close()
