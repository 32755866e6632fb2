"""Benchmark 6: a snapshot of a 20-process Python job, stacks included, in a few seconds;
and within its bound when the stack tool hangs."""

from __future__ import annotations

import json
import os
import signal
import subprocess

from common import PYTHON, REPO, Row, Series, run_timed

PROCESSES = 20
GOAL_S = 3.0
BOUND_S = 5.0  # total_timeout given to the snapshot whose stack tool hangs
SLACK_S = 0.25  # "within the bound" allows this much for returning from the call


def run(runs: int, *, processes: int = PROCESSES, bound_s: float = BOUND_S) -> list[Row]:
    tree = subprocess.Popen([PYTHON, str(REPO / "bench" / "snap_tree.py"), str(processes)],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert tree.stdout is not None
        if not tree.stdout.readline().startswith("ready"):
            raise RuntimeError("process tree did not start")
        worker = [PYTHON, str(REPO / "bench" / "snap_worker.py"), str(tree.pid)]
        took, inner = Series(), Series()
        found = stuck = 0
        for _ in range(runs):
            result = run_timed([*worker, "20"])
            data = json.loads(result.stdout)
            took.add(result.wall)
            inner.add(data["elapsed_s"])
            found, stuck = data["processes"], data["stuck_frames"]
        hung = json.loads(run_timed([*worker, str(bound_s), "--hang"]).stdout)
    finally:
        os.killpg(tree.pid, signal.SIGKILL)
        tree.wait()
    return [
        Row("snapshot", f"{processes} Python processes, stacks included (take_snapshot)",
            inner.text(), f"with process start-up: {took.text()}", "", f"< {GOAL_S:g} s",
            inner.median < GOAL_S),
        Row("snapshot", "processes found in the tree", str(found), "", "", str(processes),
            found == processes),
        Row("snapshot", "stacks showing the stuck frame (needs ptrace permission)",
            str(stuck), "", "", str(processes - 1), stuck == processes - 1),
        Row("snapshot", f"py-spy hangs: snapshot returns (bound {bound_s:g} s)",
            f"{hung['elapsed_s']:.2f} s", "", "", f"<= {bound_s:g} s",
            hung["elapsed_s"] <= bound_s + SLACK_S),
    ]
