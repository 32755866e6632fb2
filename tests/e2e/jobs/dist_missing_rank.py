"""Rank 0 of a world of 2 calls init_process_group; rank 1 is never started, so rank 0 waits
in the rendezvous (MASTER_ADDR/MASTER_PORT) forever."""

from __future__ import annotations

import datetime
import os

import torch.distributed as dist
from jobkit import free_port


def main() -> None:
    path = os.environ.get("JOB_PIDS_FILE")
    if path:
        with open(path, "a") as fh:
            fh.write(f"{os.getpid()}\n")
    port = free_port()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="2")
    print(f"[rank0] MASTER_ADDR=127.0.0.1 MASTER_PORT={port} WORLD_SIZE=2")
    print("[rank0] calling init_process_group(backend=gloo, world_size=2)")
    dist.init_process_group("gloo", timeout=datetime.timedelta(hours=1))
    print("[rank0] process group initialized")


if __name__ == "__main__":
    main()
