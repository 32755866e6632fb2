"""A tiny stand-in for a verl GKD job: it logs its way to weight sync, then hangs there.

Run by `hangwatch demo` as `python -m hangwatch.jobs.demo_job LOG`. The hang is real: the process
blocks reading a pipe that nobody will ever write, as a rank waits on a peer that never comes.
"""

from __future__ import annotations

import os
import sys
import time

STEPS = [
    ("Generating train split: 0 examples [00:00, ? examples/s]", 0.3),
    ("Generating train split: 2048 examples [00:01, 1811.25 examples/s]", 0.3),
    ("(TaskRunner pid=4242) [ACTOR] init_model START", 0.5),
    ("(TaskRunner pid=4242) [ACTOR] init_model DONE", 0.3),
    ("(TaskRunner pid=4242) [ROLLOUT] init_model START", 0.5),
    ("(TaskRunner pid=4242) INFO vllm engine ready: tp=1 gpu_memory_utilization=0.6", 0.3),
    ("(TaskRunner pid=4242) [ROLLOUT] init_model DONE", 0.3),
    ("(TaskRunner pid=4242) [SYNC] Starting weight synchronization", 0.2),
    ("(TaskRunner pid=4242) [SYNC] Waiting for rollout weights", 0.0),
]


def write(log: str, text: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(f"{stamp} {text}\n")


def wait_for_rollout_weights() -> None:
    """Block forever, like a trainer rank whose rollout peer never joins the collective."""
    read_end, _write_end = os.pipe()
    os.read(read_end, 1)


def main(log: str) -> None:
    for text, pause in STEPS:
        write(log, text)
        time.sleep(pause)
    wait_for_rollout_weights()


if __name__ == "__main__":
    main(sys.argv[1])
