"""Four gloo ranks (started by torchrun) that hang in a chosen way, for the stack grouping.

SCENARIO (first argument):
- data:    rank 2 blocks in `load_next_batch` (its DataLoader's dataset never answers) while
           the other ranks wait for it in all_reduce;
- save:    rank 0 blocks in torch.save (the checkpoint path is a FIFO nobody reads) while the
           others wait in a barrier;
- barrier: every local rank waits in the same barrier for a fifth rank that runs elsewhere
           (the test starts it with RANK=4 outside this job's process tree);
- workers: rank 0 only, a DataLoader with 3 workers, one of which deadlocks on a lock it
           already holds; the others sit idle, the rank waits in DataLoader.__next__.
Each rank writes `ready RANK` to READY_DIR/RANK just before it blocks.
"""

from __future__ import annotations

import datetime
import os
import sys
import threading
from pathlib import Path

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

HOUR = datetime.timedelta(hours=1)  # gloo must not time out while the test looks


def ready(note: str = "") -> None:
    rank = os.environ.get("RANK", "0")
    path = Path(os.environ["READY_DIR"]) / f"{rank}{note}"
    path.write_text(f"ready {rank}\n")


class SilentShard(Dataset):
    """A dataset whose reader never answers."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> torch.Tensor:
        ready()
        threading.Event().wait()
        return torch.zeros(1)


class LockedShard(Dataset):
    """Item 0 takes a lock it already holds (a non-reentrant lock taken twice): that worker
    never returns. The others return their items and go idle, waiting for indices."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> torch.Tensor:
        if index == 0:
            ready("-worker")
            with self.lock:
                self.lock.acquire()
        return torch.zeros(1)


def load_next_batch() -> torch.Tensor:
    return next(iter(DataLoader(SilentShard(), batch_size=2)))


def save_checkpoint(path: str) -> None:
    ready()
    torch.save({"w": torch.zeros(4)}, path)


def train_step(grad: torch.Tensor) -> None:
    ready()
    dist.all_reduce(grad)


def wait_for_everyone() -> None:
    ready()
    dist.barrier()


def main() -> None:
    scenario = sys.argv[1]
    rank = int(os.environ["RANK"])
    if scenario == "workers":
        loader = DataLoader(LockedShard(), batch_size=1, num_workers=3, prefetch_factor=1)
        ready()
        for _ in loader:
            pass
        return
    world = int(os.environ.get("JOB_WORLD", os.environ["WORLD_SIZE"]))
    dist.init_process_group("gloo", timeout=HOUR, world_size=world, rank=rank)
    if scenario == "data":
        if rank == 2:
            load_next_batch()
        train_step(torch.ones(4))
    elif scenario == "save":
        if rank == 0:
            save_checkpoint(os.environ["CKPT_PATH"])
        wait_for_everyone()
    elif scenario == "barrier":
        if rank == world - 1 and os.environ.get("REMOTE_RANK_STALLS"):
            ready()
            threading.Event().wait()  # the remote rank never reaches the barrier
        wait_for_everyone()


if __name__ == "__main__":
    main()
