"""Deliver alerts off the watch loop: at least once, in order, surviving outages and SIGKILL.

`submit` only puts the alert on an in-memory queue, so the loop never waits. One spooler
thread writes each alert into every target's spool at once; one worker thread per target
delivers its spool oldest first, retrying with exponential backoff and jitter. An alert
leaves the spool only once its target took it (or refused it for good, a 4xx), so one that
was being sent when hangwatch died is sent again after the restart: receivers dedupe by
`episode`.
"""

from __future__ import annotations

import queue
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hangwatch.alerts.spool import Spool, open_spool
from hangwatch.alerts.targets import (
    AM_RESEND_S,
    TIMEOUT_S,
    AlertmanagerTarget,
    DeliveryError,
    Target,
    TargetSpec,
    make_target,
)

BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 300.0
# How long close waits, past its drain time, for a send already under way: its outcome is
# then known (delivered, or still spooled), and no closed sender delivers behind the next
# one reading the same spool.
FINISH_SEND_S = 1.0
RESULTS = ("delivered", "rejected", "dropped")
Log = Callable[[str], None]
Spooled = Callable[[], None]


@dataclass(frozen=True)
class TargetStats:
    """For metrics: outcomes per alert (`delivered`, `rejected`, `dropped`), failed attempts
    (retries included) and how many wait in the spool."""

    label: str
    results: Mapping[str, int]
    failures: int
    spooled: int


@dataclass(frozen=True)
class Undelivered:
    spec: TargetSpec
    count: int
    where: str


class _Worker:
    def __init__(self, target: Target, spool: Spool, label: str, log: Log,
                 backoff: tuple[float, float]) -> None:
        self.target = target
        self.spool = spool
        self.label = label
        self.log = log
        self.backoff = backoff
        self.wake = threading.Event()  # a new alert, or stop
        self.stop = threading.Event()
        self.empty = threading.Event()
        # Every outcome's series exists from the start, so rate() and alerts see the first one.
        self.results: dict[str, int] = dict.fromkeys(RESULTS, 0)
        self.failures = 0
        self._attempts = 0
        self._thread = threading.Thread(target=self._run, name=f"hangwatch-alert-{label}",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def count(self, result: str, n: int = 1) -> None:
        self.results[result] = self.results.get(result, 0) + n

    def _run(self) -> None:
        last_resend = time.monotonic()
        while not self.stop.is_set():
            self.wake.clear()
            item = self.spool.oldest()
            if item is None:
                self.empty.set()
                self.wake.wait(AM_RESEND_S if self._resends() else None)
                if self._resends() and time.monotonic() - last_resend >= AM_RESEND_S:
                    last_resend = time.monotonic()
                    self._resend()
                continue
            self.empty.clear()
            self._deliver(*item)

    def _deliver(self, handle: Any, payload: Mapping[str, Any]) -> None:
        name = self.target.spec.display
        try:
            try:
                self.target.send(payload)
            except DeliveryError:
                raise
            except Exception as exc:  # a thread that dies would lose every later alert
                raise DeliveryError(f"{type(exc).__name__}: {exc}", retry=True) from None
        except DeliveryError as exc:
            self.failures += 1
            if not exc.retry:
                self.count("rejected")
                self.spool.remove(handle)
                self.log(f"alert {payload.get('event')} {payload.get('episode')} to {name} "
                         f"refused: {exc}; not retried")
                return
            self._attempts += 1
            delay = min(self.backoff[1], self.backoff[0] * 2 ** (self._attempts - 1))
            delay *= 0.5 + random.random() / 2  # jitter: many nodes do not retry in step
            if self._attempts == 1 or delay >= self.backoff[1] / 2:
                self.log(f"alert to {name} failed: {exc}; retrying with backoff "
                         f"({len(self.spool)} waiting)")
            self.wake.wait(delay)
            return
        self.spool.remove(handle)
        self.count("delivered")
        if self._attempts:
            self.log(f"alert to {name} delivered after {self._attempts + 1} attempts")
        self._attempts = 0

    def _resends(self) -> bool:
        return isinstance(self.target, AlertmanagerTarget)

    def _resend(self) -> None:
        assert isinstance(self.target, AlertmanagerTarget)
        try:
            self.target.resend()
        except DeliveryError as exc:
            self.failures += 1
            self.log(f"re-sending firing alerts to {self.target.spec.display} failed: {exc}")

    def close(self) -> None:
        self.stop.set()
        self.wake.set()

    def join(self, timeout: float) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)


class Sender:
    def __init__(self, specs: Sequence[TargetSpec], spool_root: Path | None, *, log: Log,
                 timeout: float = TIMEOUT_S,
                 backoff: tuple[float, float] = (BACKOFF_FIRST_S, BACKOFF_MAX_S)) -> None:
        self.specs = list(specs)
        self.spool_root = spool_root
        self.log = log
        self._timeout = timeout
        self._backoff = backoff
        self.workers = self._workers(self.specs, {})
        self._inbox: queue.Queue[tuple[Mapping[str, Any], Spooled | None] | None] = (
            queue.Queue())
        self._spooler = threading.Thread(target=self._spool_all, name="hangwatch-alert-spool",
                                         daemon=True)
        self._started = self._closed = False

    def _workers(self, specs: Sequence[TargetSpec], keep: Mapping[str, _Worker]) -> list[_Worker]:
        labels = _unique_labels([spec.label for spec in specs])
        return [keep[spec.key] if spec.key in keep else
                _Worker(make_target(spec, timeout=self._timeout),
                        open_spool(self.spool_root, spec.key, self.log), label, self.log,
                        self._backoff)
                for spec, label in zip(specs, labels, strict=True)]

    def start(self) -> Sender:
        self._started = True
        self._spooler.start()
        for worker in self.workers:
            worker.start()
        return self

    def retarget(self, specs: Sequence[TargetSpec]) -> list[Undelivered]:
        """A reload: targets that remain keep their worker and spool; new ones start; those
        dropped stop at once, what they had not delivered left in their spool (returned)."""
        old = {w.target.spec.key: w for w in self.workers}
        workers = self._workers(specs, old)
        self.specs, self.workers = list(specs), workers  # the spooler reads the list anew
        for worker in workers:
            if worker.target.spec.key not in old and self._started:
                worker.start()
        kept = {w.target.spec.key for w in workers}
        dropped = [w for key, w in old.items() if key not in kept]
        for worker in dropped:
            worker.close()
        return [left for left in map(_undelivered, dropped) if left is not None]

    def submit(self, payload: Mapping[str, Any], on_spooled: Spooled | None = None) -> None:
        """Never blocks: the alert is on disk within milliseconds, on the spooler thread,
        which then calls `on_spooled` (if every target's spool took it)."""
        if not self._closed:
            self._inbox.put((payload, on_spooled))

    def keep_firing(self, payload: Mapping[str, Any]) -> None:
        """A restored open episode: Alertmanager targets keep it alive (others need nothing)."""
        for worker in self.workers:
            if isinstance(worker.target, AlertmanagerTarget):
                worker.target.keep_firing(payload)

    def _spool_all(self) -> None:
        while (item := self._inbox.get()) is not None:
            payload, on_spooled = item
            lost = False
            for worker in self.workers:
                try:
                    dropped = worker.spool.put(payload)
                except OSError as exc:
                    lost = True
                    worker.count("dropped")
                    self.log(f"alert spool for {worker.target.spec.display}: cannot write "
                             f"({exc.strerror or exc}); alert {payload.get('episode')} lost")
                    continue
                if dropped:
                    worker.count("dropped", len(dropped))
                    self.log(f"alert spool for {worker.target.spec.display} is full: dropped "
                             f"the {len(dropped)} oldest alert(s)")
                worker.empty.clear()
                worker.wake.set()
            if on_spooled is not None and not lost:
                on_spooled()

    def stats(self) -> list[TargetStats]:
        return [TargetStats(w.label, dict(w.results), w.failures, len(w.spool))
                for w in self.workers]

    def close(self, drain_s: float) -> list[Undelivered]:
        """Give pending alerts up to `drain_s` to go out, then stop. What is left stays in the
        spool for the next hangwatch using it."""
        deadline = time.monotonic() + drain_s
        self._closed = True
        self._inbox.put(None)
        self._spooler.join(max(0.0, deadline - time.monotonic()))
        for worker in self.workers:
            worker.empty.wait(max(0.0, deadline - time.monotonic()))
        for worker in self.workers:
            worker.close()
        finish = max(deadline, time.monotonic()) + FINISH_SEND_S
        for worker in self.workers:
            worker.join(max(0.0, finish - time.monotonic()))
        return [left for left in map(_undelivered, self.workers) if left is not None]


def _undelivered(worker: _Worker) -> Undelivered | None:
    waiting = len(worker.spool)
    if not waiting:
        return None
    folder = getattr(worker.spool, "folder", None)
    return Undelivered(worker.target.spec, waiting, str(folder) if folder else "memory")


def _unique_labels(labels: list[str]) -> list[str]:
    """Two webhooks on one host still need series of their own."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label}#{seen[label]}")
    return out
