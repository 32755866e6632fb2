"""The sender thread against a real receiver: outages, refusals, order, restarts."""

from __future__ import annotations

import time
from pathlib import Path

from hangwatch.alerts.sender import Sender
from hangwatch.alerts.targets import TargetSpec
from tests.fakes.receiver import Receiver, free_port

FAST = (0.05, 0.2)  # backoff for tests: first retry and cap, in seconds


def alert(n: int) -> dict:
    return {"event": "stall", "episode": f"ep{n}", "since": 0.0, "time": 0.0}


def test_alerts_made_while_the_receiver_is_down_are_delivered_in_order_once_it_is_back(
        tmp_path: Path):
    port = free_port()
    log: list[str] = []
    sender = Sender([TargetSpec("webhook", url=f"http://127.0.0.1:{port}/h")], tmp_path,
                    log=log.append, backoff=FAST).start()
    for n in range(3):
        sender.submit(alert(n))
    deadline = time.monotonic() + 5
    while sender.stats()[0].failures < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sender.stats()[0].spooled == 3
    with Receiver(port) as receiver:
        got = receiver.wait_for(3)
        assert sender.close(5.0) == []
    assert [b["episode"] for b in got] == ["ep0", "ep1", "ep2"]
    stats = sender.stats()[0]
    assert stats.results == {"delivered": 3, "rejected": 0, "dropped": 0}
    assert stats.failures >= 2 and stats.spooled == 0
    assert "retrying" in log[0] and "delivered after" in log[-1]


def test_a_refused_alert_is_not_retried_forever_and_the_next_one_goes_out(tmp_path: Path):
    with Receiver(status=400) as receiver:
        log: list[str] = []
        sender = Sender([TargetSpec("webhook", url=receiver.url())], tmp_path, log=log.append,
                        backoff=FAST).start()
        sender.submit(alert(1))
        sender.submit(alert(2))
        receiver.wait_for(2)
        assert sender.close(5.0) == []
    assert sender.stats()[0].results == {"delivered": 0, "rejected": 2, "dropped": 0}
    assert "refused" in log[0]


def test_what_is_left_at_close_is_sent_by_the_next_sender_on_the_same_spool(tmp_path: Path):
    port = free_port()
    spec = TargetSpec("webhook", url=f"http://127.0.0.1:{port}/h")
    first = Sender([spec], tmp_path, log=lambda _: None, backoff=FAST).start()
    first.submit(alert(1))
    [left] = first.close(0.3)
    assert left.count == 1 and left.where == str(tmp_path / spec.key)
    with Receiver(port) as receiver:
        second = Sender([spec], tmp_path, log=lambda _: None, backoff=FAST).start()
        second.submit(alert(2))
        got = receiver.wait_for(2)
        second.close(5.0)
    assert [b["episode"] for b in got] == ["ep1", "ep2"]


def test_close_waits_for_a_send_under_way_and_reports_it_delivered(tmp_path: Path):
    # A closed sender must not deliver behind the next one on its spool (a duplicate) nor
    # report as left an alert its receiver then takes.
    with Receiver(delay=0.5) as receiver:
        sender = Sender([TargetSpec("webhook", url=receiver.url())], tmp_path,
                        log=lambda _: None, backoff=FAST).start()
        sender.submit(alert(1))
        receiver.wait_for(1)  # the POST is in, its answer half a second away
        assert sender.close(0.0) == []
    assert sender.stats()[0].results["delivered"] == 1
    assert sender.stats()[0].spooled == 0


def test_a_target_that_hangs_does_not_hold_up_another(tmp_path: Path):
    with Receiver(hang=True) as stuck, Receiver() as fine:
        sender = Sender([TargetSpec("webhook", url=stuck.url()),
                         TargetSpec("webhook", url=fine.url())], tmp_path,
                        log=lambda _: None, timeout=3.0, backoff=FAST).start()
        started = time.monotonic()
        sender.submit(alert(1))
        fine.wait_for(1)
        assert time.monotonic() - started < 1.0
        sender.close(0.0)
    labels = [s.label for s in sender.stats()]
    assert labels == ["webhook:127.0.0.1", "webhook:127.0.0.1#2"]  # series of their own


def test_an_unexpected_error_in_a_target_does_not_end_its_thread(tmp_path: Path):
    class Flaky:
        spec = TargetSpec("webhook", url="http://127.0.0.1:1/h")

        def __init__(self) -> None:
            self.calls = 0
            self.got: list[dict] = []

        def send(self, payload) -> None:
            self.calls += 1
            if self.calls == 1:
                raise RuntimeError("boom")
            self.got.append(payload)

    log: list[str] = []
    sender = Sender([Flaky.spec], tmp_path, log=log.append, backoff=FAST)
    flaky = sender.workers[0].target = Flaky()
    sender.start()
    sender.submit(alert(1))
    assert sender.close(5.0) == []
    assert flaky.got == [alert(1)] and "RuntimeError: boom" in log[0]


def test_on_spooled_is_called_once_the_alert_is_on_disk(tmp_path: Path):
    import threading

    spec = TargetSpec("webhook", url=f"http://127.0.0.1:{free_port()}/h")
    sender = Sender([spec], tmp_path, log=lambda _: None, backoff=FAST).start()
    spooled = threading.Event()
    on_disk: list[int] = []

    def confirm() -> None:
        on_disk.append(len(list((tmp_path / spec.key).iterdir())))
        spooled.set()

    sender.submit(alert(1), on_spooled=confirm)
    assert spooled.wait(5)
    assert on_disk[0] >= 1  # the alert file was there when we were told
    sender.close(0.1)


def test_retarget_starts_new_targets_and_stops_dropped_ones_keeping_their_spool(
        tmp_path: Path):
    down = TargetSpec("webhook", url=f"http://127.0.0.1:{free_port()}/h")
    sender = Sender([down], tmp_path, log=lambda _: None, backoff=FAST).start()
    sender.submit(alert(1))
    deadline = time.monotonic() + 5
    while sender.stats()[0].spooled < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    with Receiver() as receiver:
        [left] = sender.retarget([TargetSpec("webhook", url=receiver.url())])
        assert left.spec == down and left.count == 1  # kept on disk for a later sender
        sender.submit(alert(2))
        assert [b["episode"] for b in receiver.wait_for(1)] == ["ep2"]
        assert sender.close(5.0) == []
    assert [s.label for s in sender.stats()] == ["webhook:127.0.0.1"]
