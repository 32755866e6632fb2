"""Soak: `hangwatch serve` under steady load for minutes or hours counts every line once, never
calls a flowing job stalled or blind, and holds its memory, file descriptors and threads flat.

    python bench/soak.py --minutes 60     # the figures in the docs
    python bench/soak.py --seconds 60     # what the test suite runs

8 watches, each following one log written at ~600 lines/s (every line a progress step) and
rotated by rename every 40 s, metrics on. Sampled every 2 s: the process's RSS, open fds and
threads. At the end, once the writers stop, `hangwatch_lines_total` of each watch (summed
over its logs) must equal the lines written to it, and serve's JSON events must hold no
`stall` and no `blind`. After the warm-up (the first minute), RSS must grow by less than
10 MB, and fds and threads must stay flat: once the writers stop, back at the value most
samples show, and never above it by more than one rotated file per log.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, free_port, stop

WATCHES = 8
RATE = 600  # lines per second per log
ROTATE_S = 40.0
TICK_S = 0.05
SAMPLE_S = 2.0
STALL = "30s"
RSS_GROWTH_MB = 10.0
# Above the usual count, a moment may hold one more fd or thread per watch (the old and the
# new file across a rotation) and a few more for the service's own work in flight (a metrics
# scrape's socket, a spool write): a leak shows as a count that stays up once the writers stop.
PEAK_ABOVE_USUAL = WATCHES + 2
DRAIN_S = 60.0  # how long serve may take to count the last lines written
SETTLE_S = 15.0
PACK = """pack: soak
phases:
  - id: train
    start: 'TRAIN START'
progress:
  - id: soak_step
    match: '\\bstep (?P<step>\\d+) '
    counter: step
"""
_LINES = re.compile(r'^hangwatch_lines_total\{[^}]*watch="(?P<watch>[^"]+)"[^}]*\} (?P<n>\S+)$',
                    re.M)


@dataclass
class Sample:
    at: float  # seconds since serve was ready
    rss_mb: float
    fds: int
    threads: int


@dataclass
class Result:
    seconds: float
    written: dict[str, int]
    counted: dict[str, int]
    bad_events: list[str]
    samples: list[Sample]
    warmup_s: float
    rotations: int
    problems: list[str] = field(default_factory=list)

    @property
    def after(self) -> list[Sample]:
        return [s for s in self.samples if s.at >= self.warmup_s] or self.samples[-1:]

    def judge(self) -> None:
        if self.counted != self.written:
            diff = {w: self.counted.get(w, 0) - n for w, n in self.written.items()
                    if self.counted.get(w, 0) != n}
            self.problems.append(f"lines counted differ from lines written: {diff}")
        if self.bad_events:
            self.problems.append(f"{len(self.bad_events)} stall/blind event(s) while lines "
                                 f"flowed: {self.bad_events[:3]}")
        after = self.after
        growth = after[-1].rss_mb - after[0].rss_mb
        if growth >= RSS_GROWTH_MB:
            self.problems.append(f"RSS grew {growth:.1f} MB after the warm-up")
        for name in ("fds", "threads"):
            usual, end = steady(after, name), getattr(self.samples[-1], name)
            peak = max(getattr(s, name) for s in after)
            if end > usual or peak > usual + PEAK_ABOVE_USUAL:
                self.problems.append(f"{name} climbed: usually {usual}, at most {peak}, "
                                     f"{end} once the writers stopped")

    def report(self) -> str:
        after = self.after
        total = sum(self.written.values())
        rss = [s.rss_mb for s in after]
        lines = [
            f"soak: {WATCHES} watches x ~{RATE} lines/s, rotated every {ROTATE_S:g} s, "
            f"metrics on, {self.seconds:.0f} s ({self.rotations} rotations per log)",
            f"  lines written {total}, counted {sum(self.counted.values())} "
            f"({total / self.seconds:.0f} lines/s in all)",
            f"  stall/blind events: {len(self.bad_events)}",
            f"  RSS after the {self.warmup_s:.0f} s warm-up: {after[0].rss_mb:.1f} MB, at the "
            f"end {after[-1].rss_mb:.1f} MB (growth {after[-1].rss_mb - after[0].rss_mb:+.1f}"
            f" MB; range {min(rss):.1f}-{max(rss):.1f})",
            *(f"  {name} after the warm-up: usually {steady(after, name)}, range "
              f"{min(getattr(s, name) for s in after)}-{max(getattr(s, name) for s in after)}"
              f", {getattr(self.samples[-1], name)} once the writers stopped"
              for name in ("fds", "threads")),
        ]
        lines.append("  ok" if not self.problems else "  FAILED: " + "; ".join(self.problems))
        return "\n".join(lines)


def steady(samples: list[Sample], name: str) -> int:
    """The value most samples show: fds rise for a moment while a rotated file is drained
    (one per log), then come back to it."""
    values = [getattr(s, name) for s in samples]
    return max(set(values), key=lambda v: (values.count(v), -v))


class Writers:
    """One thread writing every watch's log at RATE lines/s, rotating each by rename."""

    def __init__(self, logs: dict[str, Path]) -> None:
        self.logs = logs
        self.written = dict.fromkeys(logs, 0)
        self.rotations = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="soak-writers", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(timeout=30)

    def _run(self) -> None:
        files: dict[str, TextIO] = {w: path.open("a", encoding="utf-8")
                                    for w, path in self.logs.items()}
        for w, fh in files.items():
            fh.write("TRAIN START\n")
            fh.flush()
            self.written[w] += 1
        started = last_rotation = time.monotonic()
        try:
            while not self.stop.wait(TICK_S):
                now = time.monotonic()
                if now - last_rotation >= ROTATE_S:
                    files = self._rotate(files)
                    last_rotation = now
                due = int((now - started) * RATE)
                for w, fh in files.items():
                    steps = range(self.written[w], due + 1)
                    fh.write("".join(f"2026-01-11 10:00:00 [rank0] step {n} loss 0.{n % 997:03d}"
                                     f" lr 3e-4 tokens/s {n % 7919}\n" for n in steps))
                    fh.flush()
                    self.written[w] += len(steps)
        finally:
            for fh in files.values():
                fh.close()

    def _rotate(self, files: dict[str, TextIO]) -> dict[str, TextIO]:
        out: dict[str, TextIO] = {}
        for w, fh in files.items():
            fh.close()
            path = self.logs[w]
            os.replace(path, path.with_name(path.name + ".1"))
            out[w] = path.open("a", encoding="utf-8")
        self.rotations += 1
        return out


def scrape(port: int) -> dict[str, int]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    counted: dict[str, int] = {}
    for m in _LINES.finditer(text):
        counted[m["watch"]] = counted.get(m["watch"], 0) + int(float(m["n"]))
    return counted


def wait_ready(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"serve exited with {proc.returncode} before it was ready")
        try:
            if len(scrape(port)) == WATCHES:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"serve's metrics did not answer within {timeout:g} s")


def sample(ps: psutil.Process, at: float) -> Sample:
    return Sample(at, ps.memory_info().rss / (1 << 20), ps.num_fds(), ps.num_threads())


def soak(folder: Path, seconds: float, warmup_s: float) -> Result:
    (folder / "pack.yaml").write_text(PACK)
    port = free_port()
    config = ["state_dir: state", f"metrics: 127.0.0.1:{port}", "watches:"]
    logs = {}
    for w in range(WATCHES):
        name = f"job{w}"
        (folder / name).mkdir()
        logs[name] = folder / name / "train.log"
        logs[name].touch()
        config += [f"  - name: {name}", f"    logs: ['{name}/train.log']", f"    stall: {STALL}",
                   "    rules: [pack.yaml]", "    snapshot: false"]
    (folder / "serve.yaml").write_text("\n".join(config) + "\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with (folder / "events.jsonl").open("wb") as out, (folder / "serve.err").open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "hangwatch", "serve", "--config",
                                 "serve.yaml", "--json"], stdout=out, stderr=err, env=env,
                                cwd=folder)
    writers = Writers(logs)
    try:
        wait_ready(port, proc)
        ps = psutil.Process(proc.pid)
        start = time.monotonic()
        writers.start()
        samples = []
        while (elapsed := time.monotonic() - start) < seconds:
            samples.append(sample(ps, elapsed))
            time.sleep(min(SAMPLE_S, max(0.0, seconds - elapsed)))
        writers.finish()
        elapsed = time.monotonic() - start
        counted = drain(port, writers.written)
        samples.append(settled(ps, start, steady(samples, "fds"), steady(samples, "threads")))
    finally:
        writers.finish()
        stop(proc, timeout=30)
    bad = []
    for line in (folder / "events.jsonl").read_text(errors="replace").splitlines():
        with_event = json.loads(line) if line.startswith("{") else {}
        if with_event.get("event") in ("stall", "blind"):
            bad.append(line[:200])
    result = Result(elapsed, dict(writers.written), counted, bad, samples, warmup_s,
                    writers.rotations)
    result.judge()
    return result


def settled(ps: psutil.Process, start: float, fds: int, threads: int) -> Sample:
    """The last sample, once a log rotated just before the end is let go (its follower keeps
    it open for a grace period of quiet) and a thread that comes and goes (a metrics scrape's
    handler) has ended, or SETTLE_S pass: a leak stays past it, those do not."""
    deadline = time.monotonic() + SETTLE_S
    while (ps.num_fds() > fds or ps.num_threads() > threads) and \
            time.monotonic() < deadline:
        time.sleep(0.2)
    return sample(ps, time.monotonic() - start)


def drain(port: int, written: dict[str, int]) -> dict[str, int]:
    """Scrape until every written line is counted, or DRAIN_S pass: the last count."""
    deadline = time.monotonic() + DRAIN_S
    counted = scrape(port)
    while counted != written and time.monotonic() < deadline:
        time.sleep(0.5)
        counted = scrape(port)
    return counted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--minutes", type=float)
    length.add_argument("--seconds", type=float)
    parser.add_argument("--warmup", type=float, default=60.0, metavar="SECONDS",
                        help="memory, fds and threads are judged after this (default 60; "
                             "at most a third of the run)")
    args = parser.parse_args(argv)
    seconds = args.seconds or (args.minutes or 5.0) * 60
    warmup = min(args.warmup, seconds / 3)
    with tempfile.TemporaryDirectory(prefix="hangwatch-soak-") as tmp:
        result = soak(Path(tmp), seconds, warmup)
    print(result.report(), flush=True)
    return 1 if result.problems else 0


if __name__ == "__main__":
    sys.exit(main())
