"""Render docs/live-view.svg: the live view as a stall shows it (run from the checkout root:
`python docs/live_view.py`). The screen is drawn by the real ConsoleReporter."""

from __future__ import annotations

import io
import sys
from pathlib import Path

from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hangwatch.core.events import Advice, Incident, PhaseEvent, SignalEvent, StallEvent
from hangwatch.reporters.base import View
from hangwatch.reporters.console import ConsoleReporter

WIDTH, HEIGHT = 100, 34
WALL = 1_767_225_600.0
LINE = "[rank3] NCCL WARN Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, " \
       "OpType=ALLREDUCE) ran for 600012 milliseconds before timing out."


def main() -> None:
    signal = SignalEvent("nccl_watchdog_timeout", "error", "train.log", 4127, LINE, WALL, (
        Advice("Find the rank that never entered the collective: run `py-spy dump` on each "
               "rank, or set TORCH_NCCL_TRACE_BUFFER_SIZE=2000 and read the flight recorder.",
               f"signal nccl_watchdog_timeout at train.log:4127: {LINE}"),))
    stall = StallEvent("weight_sync", "Weight sync (NCCL)", "rollout", 612.0, 600.0, WALL,
                       advice=signal.advice, signals=(signal,))
    advice = (
        Advice("Rank 3 waits in all_reduce while ranks 0-2 wait in barrier: a rank took "
               "another branch. Compare the code paths around the last collective.",
               "stack: pid 4242 rank 3 in all_reduce; stack: pids 4240-4241 in barrier"),
        *signal.advice,
        Advice("Raise the NCCL timeout only once no rank is missing.",
               "phase weight_sync (Weight sync (NCCL)) in progress since train.log:4119"),
        Advice("Check the interconnect: `nvidia-smi topo -m`, NCCL_DEBUG=INFO.",
               "phase weight_sync (Weight sync (NCCL)) in progress since train.log:4119"),
    )
    screen = Console(file=io.StringIO(), width=WIDTH, height=HEIGHT, force_terminal=True)
    reporter = ConsoleReporter(io.StringIO(), now=lambda: WALL + 620, console=screen)
    reporter.view = View({"phase": "weight_sync", "phase_title": "Weight sync (NCCL)",
                          "phase_since_wall": WALL - 5, "last_completed": "rollout",
                          "last_completed_title": "Rollout", "idle_s": 612.0,
                          "threshold_s": 600.0, "stalled": True, "finished": False,
                          "lines": {"train.log": 4127}, "signals": [], "timeline": []},
                         ("train.log",), ("step 812 loss 1.92 lr 3e-5", "[SYNC] Starting "
                                          "weight synchronization", LINE))
    reporter.event(PhaseEvent("weight_sync", "Weight sync (NCCL)", "started", "train.log",
                              4119, WALL))
    reporter.event(signal)
    reporter.incident(Incident(stall, "hangwatch-reports/20260101T001012Z-weight_sync",
                               advice, ("pid 4242 rank 3 (python): all_reduce "
                                        "(torch/distributed/distributed_c10d.py:2501)",)))
    reporter.live.stop()
    record = Console(file=io.StringIO(), width=WIDTH, height=HEIGHT, record=True,
                     force_terminal=True)
    record.print(reporter.frame())
    out = Path(__file__).resolve().parent / "live-view.svg"
    out.write_text(record.export_svg(title="hangwatch train.log"))
    print(out)


if __name__ == "__main__":
    main()
