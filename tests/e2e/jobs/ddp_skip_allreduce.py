"""Two CPU ranks (gloo) train a tiny model; at step --skip-at rank 1 skips the gradient
all_reduce and waits for a batch that never comes, so rank 0 blocks inside all_reduce.

Prints what a real trainer prints: the init_process_group call, then `step N loss X`.
Each process appends its pid to $JOB_PIDS_FILE so a test can check none outlives the run.
"""

from __future__ import annotations

import argparse
import datetime
import os
import threading

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from jobkit import free_port, record_pid

WORLD_SIZE = 2
HOUR = datetime.timedelta(hours=1)  # gloo must not time out before the stall is seen


def train(rank: int, port: int, steps: int, skip_at: int) -> None:
    record_pid()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(WORLD_SIZE))
    print(f"[rank{rank}] calling init_process_group(backend=gloo, world_size={WORLD_SIZE})")
    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE, timeout=HOUR)
    print(f"[rank{rank}] process group initialized")
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.randn(64, 8)
    target = data.sum(dim=1, keepdim=True)
    for step in range(1, steps + 1):
        loss = torch.nn.functional.mse_loss(model(data), target)
        opt.zero_grad()
        loss.backward()
        if rank == 1 and step == skip_at:
            print(f"[rank{rank}] step {step}: no batch, skipping gradient sync")
            threading.Event().wait()  # the next batch never comes
        for p in model.parameters():
            assert p.grad is not None
            dist.all_reduce(p.grad)
            p.grad /= WORLD_SIZE
        opt.step()
        if rank == 0:
            print(f"step {step} loss {loss.item():.4f}")
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--skip-at", type=int, default=0, help="0: never skip")
    args = parser.parse_args()
    record_pid()
    print(f"launching {WORLD_SIZE} ranks")
    mp.spawn(train, args=(free_port(), args.steps, args.skip_at), nprocs=WORLD_SIZE)
    print("Training finished")


if __name__ == "__main__":
    main()
