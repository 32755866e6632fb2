"""A launcher starts WORLD CPU ranks (gloo) that train with gradient accumulation: each rank
prints `step N loss X` after every micro-step and all-reduces its gradients every ACCUM
steps. At step --stall-at, rank --slow-rank never gets its batch (`load_batch` waits
forever), so the other ranks run on to the next all-reduce and block there: the slow rank's
log stops a few steps behind theirs. With `--slow-rank all` every rank waits for its batch at
the same step (the job is stuck as a whole); with --skip-rank the launcher never starts that
rank, and the others wait for it in init_process_group.

Like torchrun, the launcher gives each rank `RANK`/`WORLD_SIZE` in its environment (and
`--rank N` on its command line); each rank prints to the shared stdout with a `[rankN]:`
prefix and, with --log-dir, also writes its own `rankN.log`. Every process appends its pid to
$JOB_PIDS_FILE so a test can check none outlives the run.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import threading
from pathlib import Path

from jobkit import free_port, record_pid

ACCUM = 4
HOUR = datetime.timedelta(hours=1)  # gloo must not time out before the stall is seen


def load_batch(rank: int, step: int, args: argparse.Namespace):  # type: ignore[no-untyped-def]
    import torch

    if args.slow_rank in (str(rank), "all") and step == args.stall_at:
        threading.Event().wait()  # the shard's reader never answers
    generator = torch.Generator().manual_seed(step)
    data = torch.randn(64, 8, generator=generator)
    return data, data.sum(dim=1, keepdim=True)


def rank_main(args: argparse.Namespace) -> None:
    record_pid()
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    own = Path(args.log_dir) / f"rank{rank}.log" if args.log_dir else None

    def say(text: str) -> None:
        # One write a line, as `logging` does: lines of ranks sharing a pipe stay whole.
        sys.stdout.write(f"[rank{rank}]: {text}\n")
        sys.stdout.flush()
        if own is not None:
            with own.open("a") as fh:
                fh.write(text + "\n")

    say(f"calling init_process_group(backend=gloo, world_size={world})")
    dist.init_process_group("gloo", timeout=HOUR)
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(1, args.steps + 1):
        data, target = load_batch(rank, step, args)
        loss = torch.nn.functional.mse_loss(model(data), target) / ACCUM
        loss.backward()
        if step % ACCUM == 0:
            for p in model.parameters():
                assert p.grad is not None
                dist.all_reduce(p.grad)
                p.grad /= world
            opt.step()
            opt.zero_grad()
        say(f"step {step} loss {loss.item():.4f}")
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--world", type=int, default=3)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--stall-at", type=int, default=0, help="0: never stall")
    parser.add_argument("--slow-rank", default="2", help="a rank, or all")
    parser.add_argument("--skip-rank", type=int, help="a rank the launcher never starts")
    parser.add_argument("--log-dir")
    parser.add_argument("--rank", type=int, help="set by the launcher")
    args = parser.parse_args()
    if args.rank is not None:
        rank_main(args)
        return
    record_pid()
    print(f"launching {args.world} ranks", flush=True)
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
           "WORLD_SIZE": str(args.world)}
    argv = sys.argv[1:]
    ranks = [subprocess.Popen([sys.executable, __file__, *argv, "--rank", str(r)],
                              env={**env, "RANK": str(r), "LOCAL_RANK": str(r)})
             for r in range(args.world) if r != args.skip_rank]
    codes = [p.wait() for p in ranks]
    print("Training finished" if not any(codes) else f"ranks exited with {codes}")


if __name__ == "__main__":
    main()
