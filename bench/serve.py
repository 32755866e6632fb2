"""Benchmark: `hangwatch serve` as a service costs almost nothing while the jobs are quiet, and a
restart with saved state is ready at once instead of reading the logs again.

    python bench/serve.py            # 60 s idle, a 1 GiB log
    python bench/serve.py --quick    # 20 s idle, 200 MiB
    python bench/serve.py --smoke    # tiny: only the correctness rows can fail

1. Idle: 8 watches of 8 rank logs each (64 follower threads), state kept, systemd's
   watchdog asking for a ping every 15 s. CPU share of one core over the quiet stretch (from
   SETTLE_S after READY=1) and resident memory at its end; then again with `metrics:` on
   (the loop turns every 2 s for /healthz) and a webhook target (idle: nothing is sent).
2. Restart: serve reads a large log once, is stopped (SIGTERM) and started again on the same
   state: seconds from the start of the process to READY=1, and how many bytes the restarted
   process read (/proc/PID/io rchar: its own modules and rules, not the log again).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import PYTHON, REPO, Row, free_port, note, render, stop
from loggen import generate

CPU_GOAL = 0.003  # of one core
RSS_GOAL_MB = 100
READY_GOAL_S = 1.0
REREAD_LIMIT = 64 << 20  # bytes the restarted process may read in all (its modules: ~4 MiB)
SETTLE_S = 3.0
WATCHES, RANKS = 8, 8
PACK = "pack: bench\nphases:\n  - id: train\n    start: 'TRAIN START'\n    stall_after: 1h\n"


class Systemd:
    """An abstract datagram socket standing in for systemd's $NOTIFY_SOCKET."""

    def __init__(self) -> None:
        self.name = f"hangwatch-bench-{uuid.uuid4().hex}"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + self.name)

    def wait_ready(self, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while True:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                if "READY=1" in self.sock.recv(65536).decode().split("\n"):
                    return time.monotonic()
            except TimeoutError:
                raise RuntimeError(f"no READY=1 within {timeout}s") from None

    def close(self) -> None:
        self.sock.close()


def serve(folder: Path, config: Path, systemd: Systemd) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NOTIFY_SOCKET": "@" + systemd.name,
           "WATCHDOG_USEC": "30000000"}
    with (folder / "serve.out").open("ab") as out, (folder / "serve.err").open("ab") as err:
        return subprocess.Popen([PYTHON, "-m", "hangwatch", "serve", "--config", str(config)],
                                stdout=out, stderr=err, env=env, cwd=folder)


def write_config(folder: Path, watches: dict[str, str], outputs: bool = False) -> Path:
    (folder / "pack.yaml").write_text(PACK)
    lines = ["state_dir: state"]
    if outputs:
        lines += [f"metrics: 127.0.0.1:{free_port()}", "alerts:",
                  f"  - webhook: http://127.0.0.1:{free_port()}/hook"]
    lines += ["watches:"]
    for name, logs in watches.items():
        lines += [f"  - name: {name}", f"    logs: ['{logs}']", "    stall: 10m",
                  "    rules: [pack.yaml]", "    snapshot: false"]
    path = folder / "serve.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def idle(tmp: Path, seconds: float, outputs: bool = False) -> list[Row]:
    folder = tmp / ("idle-outputs" if outputs else "idle")
    folder.mkdir()
    watches = {}
    for w in range(WATCHES):
        logs = folder / f"job{w}"
        logs.mkdir()
        for r in range(RANKS):
            (logs / f"rank{r}.log").write_text("TRAIN START\n" + "step 1\n" * 8)
        watches[f"job{w}"] = f"job{w}/rank*.log"
    systemd = Systemd()
    proc = serve(folder, write_config(folder, watches, outputs), systemd)
    try:
        systemd.wait_ready(60)
        ps = psutil.Process(proc.pid)
        time.sleep(SETTLE_S)
        threads = ps.num_threads()
        t0, c0 = time.monotonic(), sum(ps.cpu_times()[:2])
        time.sleep(seconds)
        t1, c1 = time.monotonic(), sum(ps.cpu_times()[:2])
        rss = ps.memory_info().rss / (1 << 20)
    finally:
        stop(proc)
        systemd.close()
    share = (c1 - c0) / (t1 - t0)
    what = f"{WATCHES} watches x {RANKS} idle rank logs ({threads} threads)"
    if outputs:
        what += ", metrics and a webhook on"
    return [
        Row("serve", f"{what}, {t1 - t0:.0f} s: CPU share of one core", f"{share * 100:.3f} %",
            "", "", f"<= {CPU_GOAL * 100:g} %", share <= CPU_GOAL),
        Row("serve", f"{what}: resident memory", f"{rss:.0f} MB", "", "",
            f"<= {RSS_GOAL_MB} MB", rss <= RSS_GOAL_MB),
    ]


def restart(tmp: Path, size: int) -> list[Row]:
    folder = tmp / "restart"
    folder.mkdir()
    log = folder / "train.log"
    note(f"generating a {size >> 20} MiB log")
    generate(log, size)
    config = write_config(folder, {"big": str(log)})
    systemd = Systemd()
    try:
        started = time.monotonic()
        proc = serve(folder, config, systemd)  # the first run reads the whole log
        first_s = systemd.wait_ready(600) - started
        stop(proc)
        started = time.monotonic()
        proc = serve(folder, config, systemd)
        ready_s = systemd.wait_ready(60) - started
        read = psutil.Process(proc.pid).io_counters().read_chars
        stop(proc)
    finally:
        systemd.close()
    mb = size >> 20
    limit = min(REREAD_LIMIT, size // 2)  # reading the log again would pass it
    return [
        Row("serve", f"first start on a {mb} MiB log: to READY=1 (reads it all)",
            f"{first_s:.2f} s"),
        Row("serve", f"restart on the {mb} MiB log with saved state: to READY=1",
            f"{ready_s:.2f} s", "", "", f"<= {READY_GOAL_S:g} s", ready_s <= READY_GOAL_S),
        Row("serve", "restart: bytes read by the restarted process (no re-read)",
            f"{read / (1 << 20):.1f} MiB", "", "", f"< {limit >> 20} MiB", read < limit),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true")
    size.add_argument("--smoke", action="store_true",
                      help="tiny sizes; only the no-re-read check can fail")
    args = parser.parse_args(argv)
    idle_s, log_size = (2, 64 << 20) if args.smoke else (20, 200 << 20) if args.quick else (
        60, 1 << 30)
    with tempfile.TemporaryDirectory(prefix="hangwatch-bench-serve-") as tmp:
        note(f"idle for {idle_s} s")
        rows = idle(Path(tmp), idle_s)
        note(f"idle for {idle_s} s with metrics and alerts")
        rows += idle(Path(tmp), idle_s, outputs=True)
        note("restart")
        rows += restart(Path(tmp), log_size)
    print(render(rows))
    missed = [r for r in rows if r.ok is False and (not args.smoke or "re-read" in r.measure)]
    for r in missed:
        print(f"goal missed: {r.measure}: {r.value} (goal {r.goal})", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
