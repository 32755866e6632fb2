"""The service: every watch of the config on one loop thread, systemd told how it goes.

Followers, the glob scanner, the signal relay and evidence workers put (watch, item) pairs
on one bounded queue; the loop takes them one at a time, gives each to its watch, and does
what the clock makes due. Nothing on the loop blocks: reading logs, listing directories,
snapshots and writing state files all happen on threads of their own. So a loop that turns
is a healthy service, and the watchdog ping is sent from the loop alone: if it stops turning,
systemd sees the pings stop and restarts it. The same goes for `/healthz` of the metrics
endpoint, which tells how long ago each watch's session last turned. Threads that need the
loop to act (the alert sender, once an alert is on disk) `post` a function to it.
"""

from __future__ import annotations

import contextlib
import math
import queue
import signal
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from hangwatch.core.clock import Clock, SystemClock
from hangwatch.core.prefilter import Prefilter
from hangwatch.core.rules import RuleSet
from hangwatch.errors import ConfigError, ConfigErrors, ExitStatus
from hangwatch.packs.load import load_rule_set
from hangwatch.service.config import ServiceConfig, WatchConfig, load_service_config
from hangwatch.service.globs import GlobScanner
from hangwatch.service.outputs import Console, ServiceOutputs
from hangwatch.service.runtime import WatchRuntime
from hangwatch.service.sdnotify import Notifier, status_text
from hangwatch.service.signals import SignalRelay
from hangwatch.service.state import StateStore, StateWriter
from hangwatch.sources.notify import DirectoryWatcher

QUEUE_ITEMS = 32  # blocks are up to 1 MiB: back-pressure keeps a catch-up's memory flat
STATUS_EVERY_S = 5.0
READY_AFTER_S = 30.0  # READY=1 even if a log is still being read (a hung mount): say so
STOP_WITHIN_S = 1.5  # SIGTERM to exit, whatever a follower or the disk is doing
ALERTS_DRAIN_S = 0.5  # of that, for pending alerts to go out; the rest wait in the spool
_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

Rules = dict[str, tuple[RuleSet, Prefilter | None]]


def load_watch_rules(watches: Sequence[WatchConfig]) -> Rules:
    """Each watch's rules and prefilter; watches naming the same rule files share them (the
    engines stay separate). Raises ConfigErrors listing every watch's rule errors."""
    from hangwatch.session.engines import prefilter_for

    built: dict[tuple[Path, ...], tuple[RuleSet, Prefilter | None]] = {}
    errors: list[ConfigError] = []
    for watch in watches:
        if watch.rules in built:
            continue
        try:
            rules = load_rule_set(watch.rules)
        except ConfigErrors as exc:
            errors.extend(exc.errors)
            continue
        except ConfigError as exc:
            errors.append(exc)
            continue
        built[watch.rules] = (rules, prefilter_for(rules))
    if errors:
        raise ConfigErrors(errors)
    return {w.name: built[w.rules] for w in watches}


class Service:
    """`make_reporters` gives a watch's console outputs; alerts and metrics come from the
    config's `alerts:` and `metrics:`."""

    def __init__(self, config: ServiceConfig, rules: Rules, *, make_reporters: Console,
                 err: TextIO, notifier: Notifier | None = None, clock: Clock | None = None,
                 poll: bool = False) -> None:
        self.config = config
        self.err = err
        self.notifier = notifier or Notifier()
        self.clock = clock or SystemClock()
        self.runtimes: dict[str, WatchRuntime] = {}
        self.ready = False
        self._rules = rules
        self._poll = poll
        self._queue: queue.Queue[tuple[str | None, Any]] = queue.Queue(QUEUE_ITEMS)
        self._posted: deque[Callable[[], None]] = deque()
        self.outputs = ServiceOutputs(make_reporters, post=self.post, log=self._warn)
        self._watcher = None if poll else DirectoryWatcher()
        self._scanner = GlobScanner()
        self._writer: StateWriter | None = None
        self._relay = SignalRelay(_SIGNALS, lambda signum: self._queue.put((None, signum)))
        self._started = 0.0
        self._next_clock = 0.0
        self._pinged = self._told = -math.inf

    # --- the loop --------------------------------------------------------------------------

    def run(self) -> int:
        self._relay.start()
        try:
            self._start()
            while True:
                try:
                    tag, item = self._queue.get(timeout=self._wait_s())
                except queue.Empty:
                    tag, item = "", None
                if tag is None:
                    if item is None:
                        pass  # a wake-up: what was posted is run below
                    elif item == signal.SIGHUP:
                        self._reload()
                    else:
                        return ExitStatus.INTERRUPTED if item == signal.SIGINT else ExitStatus.OK
                elif item is not None:
                    self._give(tag, item)
                self._turn()
        finally:
            self._stop()

    def post(self, work: Callable[[], None]) -> None:
        """Run `work` on the loop thread soon; callable from any thread, never blocks (a
        full queue means the loop is busy: it runs what was posted on its next turn)."""
        self._posted.append(work)
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait((None, None))

    def _run_posted(self) -> None:
        while self._posted:
            self._posted.popleft()()

    def _give(self, tag: str, item: Any) -> None:
        runtime = self.runtimes.get(tag)
        if runtime is None:
            return  # a watch dropped by a reload: what it still had in flight goes too
        runtime.handle(item)
        wait = runtime.wait_s()
        if wait is not None:  # e.g. a phase with a shorter stall_after just began
            self._next_clock = min(self._next_clock, self.clock.monotonic() + wait)

    def _turn(self) -> None:
        self._run_posted()
        now = self.clock.monotonic()
        if now >= self._next_clock:
            for runtime in self.runtimes.values():
                runtime.clock_work()
            waits = [w for w in (r.wait_s() for r in self.runtimes.values()) if w is not None]
            self._next_clock = now + (min(waits) if waits else math.inf)
        self._save(now)
        if not self.ready and (all(r.ready for r in self.runtimes.values())
                               or now - self._started >= READY_AFTER_S):
            self._become_ready(now)
        self._tell_systemd(now)
        self._tell_problems()

    def _wait_s(self) -> float | None:
        now = self.clock.monotonic()
        waits = [self._next_clock - now]
        waits.extend(w for w in (r.save_in(now) for r in self.runtimes.values()) if w is not None)
        if not self.ready:
            waits.append(self._started + READY_AFTER_S - now)
        if self.notifier.enabled:
            waits.append(self._told + STATUS_EVERY_S - now)
            if self.notifier.watchdog_s:
                waits.append(self._pinged + self.notifier.watchdog_s / 2 - now)
        wait = min(waits)
        return None if wait == math.inf else max(0.005, wait)

    # --- start, stop, reload ---------------------------------------------------------------

    def _start(self) -> None:
        self._started = self.clock.monotonic()
        self.outputs.configure(self.config, starting=True)
        self._use_state_dir(self.config.state_dir)
        for watch in self.config.watches:
            self._add(watch)
        self._scan_globs()
        self._scanner.start()

    def _stop(self) -> None:
        deadline = time.monotonic() + STOP_WITHIN_S
        self.notifier.send("STOPPING=1")
        self._scanner.stop(0.2)
        for runtime in self.runtimes.values():
            runtime.stop_following()
        self.outputs.close(min(ALERTS_DRAIN_S, max(0.0, deadline - time.monotonic() - 0.8)))
        self._run_posted()  # the sender's word on what reached its spool, for the state
        for runtime in self.runtimes.values():
            runtime.close(deadline - 0.5)
            self._save_one(runtime)
        if self._writer is not None:
            self._writer.stop(max(0.1, deadline - time.monotonic()))
        self._tell_problems()
        if self._watcher is not None:
            self._watcher.stop()
        self._relay.stop()
        self.notifier.close()

    def _add(self, watch: WatchConfig) -> None:
        saved = None
        if self._writer is not None:
            saved, warning = self._writer.store.load(watch.name)
            if warning:
                self._warn(warning)
        rules, prefilter = self._rules[watch.name]
        runtime = None
        try:
            runtime = self._runtime(watch, rules, prefilter, saved)
        except (KeyError, TypeError, ValueError) as exc:
            self._warn(f"saved state of watch {watch.name} cannot be used ({exc}); "
                       "starting afresh")
        if runtime is None:
            runtime = self._runtime(watch, rules, prefilter, None)
        self.runtimes[watch.name] = runtime

    def _runtime(self, watch: WatchConfig, rules: RuleSet, prefilter: Prefilter | None,
                 saved: Any) -> WatchRuntime:
        return WatchRuntime(watch, rules, prefilter, shared=self._queue,
                            make_reporters=self.outputs, clock=self.clock,
                            watcher=self._watcher, poll=self._poll, saved=saved)

    def _reload(self) -> None:
        """SIGHUP: the config and rules again. A bad one is refused and the old one goes on;
        watches that remain keep their followers, offsets, phases and episodes."""
        self.notifier.send("RELOADING=1", f"MONOTONIC_USEC={time.monotonic_ns() // 1000}")
        try:
            config = (load_service_config(Path(self.config.file)) if self.config.file
                      else self.config)
            rules = load_watch_rules(config.watches)
        except ConfigErrors as exc:
            self._warn(f"reload refused; the running configuration stays:\n{exc}")
            self.notifier.send("READY=1", "STATUS=reload refused (see the log); " +
                               status_text(self._status()))
            return
        old = self.runtimes
        self.runtimes, self._rules = {}, rules
        self.outputs.configure(config)
        self._use_state_dir(config.state_dir)
        for name, runtime in old.items():
            if name not in {w.name for w in config.watches}:
                runtime.stop_following()
                runtime.close(time.monotonic() + 0.5)
                self._save_one(runtime)
                self.outputs.drop(name)
        for watch in config.watches:
            if watch.name in old:
                old[watch.name].reconfigure(watch, *rules[watch.name])
                self.runtimes[watch.name] = old[watch.name]
            else:
                self._add(watch)
        self.config = config
        self._scan_globs()
        self._next_clock = 0.0
        self._warn(f"configuration reloaded: {len(self.runtimes)} watches")
        self.notifier.send("READY=1", "STATUS=" + status_text(self._status()))

    def _use_state_dir(self, folder: Path | None) -> None:
        if self._writer is not None and folder == self._writer.store.folder:
            return
        if self._writer is not None:
            self._writer.stop(1.0)
            self._writer = None
        if folder is None:
            self._warn("no state_dir: a restart reads the logs again from their start")
            return
        self._writer = StateWriter(StateStore(folder))

    def _scan_globs(self) -> None:
        self._scanner.set({name: (r.queue, r.globs()) for name, r in self.runtimes.items()})

    # --- state, systemd, warnings ----------------------------------------------------------

    def _save(self, now: float) -> None:
        for runtime in self.runtimes.values():
            if runtime.save_due(now):
                self._save_one(runtime)

    def _save_one(self, runtime: WatchRuntime) -> None:
        if self._writer is not None:
            self._writer.submit(runtime.name, runtime.snapshot())

    def _become_ready(self, now: float) -> None:
        self.ready = True
        late = [f"{name}: {', '.join(r.not_caught_up())}" for name, r in self.runtimes.items()
                if not r.ready]
        if late:
            self._warn(f"ready after {READY_AFTER_S:.0f}s with logs still unread (hung "
                       f"mount?): {'; '.join(late)}")
        for runtime in self.runtimes.values():
            self._save_one(runtime)
        self.notifier.send("READY=1", "STATUS=" + status_text(self._status()))
        self._told = now

    def _tell_systemd(self, now: float) -> None:
        if not self.notifier.enabled:
            return
        fields = []
        period = self.notifier.watchdog_s
        if period and now - self._pinged >= period / 2:
            fields.append("WATCHDOG=1")
            self._pinged = now
        if self.ready and now - self._told >= STATUS_EVERY_S:
            fields.append("STATUS=" + status_text(self._status()))
            self._told = now
        if fields:
            self.notifier.send(*fields)

    def _status(self) -> str:
        return "; ".join(r.status() for r in self.runtimes.values())

    def _tell_problems(self) -> None:
        if self._writer is not None:
            while self._writer.problems:
                self._warn(self._writer.problems.popleft())

    def _warn(self, message: str) -> None:
        print(f"hangwatch: {message}", file=self.err, flush=True)
