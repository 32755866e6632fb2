"""Deterministic, realistic training-job logs for the benchmarks.

The mix imitates a verl job run with `NCCL_DEBUG=INFO`: `host:pid:tid [rank] NCCL INFO ...`
spew, vLLM engine metrics, Ray-prefixed verl `step:N - ...` lines, tqdm bars redrawn with
`\\r`, and the phase markers of a run (init, weight sync, training loop) sprinkled through.
The same seed, mix and size always give the same bytes.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Iterator
from pathlib import Path

HOSTS = [f"gpu-node-{i:02d}" for i in range(4)]
BAR_WIDTH = 20
COUNTS = (1, 4096, 262144, 16777216)
WORKER_MESSAGES = (
    "INFO Added request chatcmpl-{n}.",
    "INFO Finished request chatcmpl-{n}.",
    'INFO: 10.0.0.{k}:4{k}12 - "POST /v1/completions HTTP/1.1" 200 OK',
    "[rank{k}]:[W111 10:00:00.{n}] Warning: collective at seq {n} took longer than usual",
    "Waiting for 2 workers (elapsed: {k}.0s)",
)
# Shares per 10,000 physical lines.
MIXES = {
    # A verl run with NCCL_DEBUG=INFO: NCCL spew is nearly everything; about 3 % of the
    # other lines hit a progress, phase or signal rule.
    "nccl-info": {"nccl": 9700, "worker": 200, "vllm": 30, "tqdm": 40, "step": 20,
                  "markers": 10},
    # A rollout-heavy log: vLLM request and metrics lines, tqdm bars, steps.
    "dense": {"nccl": 8800, "worker": 500, "vllm": 300, "tqdm": 150, "step": 200,
              "markers": 50},
    # A progress-heavy RL/SFT log: NCCL channel set-up and `Init COMPLETE` lines, verl steps,
    # `Processing batch N`, tqdm redraws and vLLM metrics; most lines hit some rule.
    "progress": {"nccl-init": 2500, "step": 1500, "batch": 2000, "tqdm": 2000, "vllm": 1990,
                 "markers": 10},
}


class LogWriter:
    """Makes lines of each kind; `lines(mix)` interleaves them."""

    def __init__(self, seed: int = 1) -> None:
        self.rng = random.Random(seed)
        self.n = 0
        self.step = 0
        self.op = 0
        self.tqdm = 0
        self.batches = 0
        self.second = 0
        self.ranks = [(h, 20000 + 97 * r, r) for r, h in enumerate(HOSTS * 2)]

    def stamp(self) -> str:
        s = self.second
        return f"2026-01-11 {10 + s // 3600 % 14:02d}:{s // 60 % 60:02d}:{s % 60:02d}"

    def nccl(self) -> str:
        host, pid, rank = self.rng.choice(self.ranks)
        tid = pid + 31 + self.rng.randrange(8)
        head = f"{host}:{pid}:{tid} [{rank}] NCCL INFO "
        k = self.rng.randrange(100)
        self.op += 1
        nxt = (rank + 1) % 8
        comm = f"0x55d4c8a{rank}b0"
        if k < 55:
            return (f"{head}AllReduce: opCount {self.op:x} sendbuff 0x7f{self.op * 4096:010x} "
                    f"recvbuff 0x7f{self.op * 4096 + 512:010x} "
                    f"count {self.rng.choice(COUNTS)} datatype 7 op 0 root 0 comm {comm} "
                    f"[nranks=8] stream 0x55d4c9f{rank}00")
        if k < 75:
            channel = self.rng.randrange(24)
            return (f"{head}Channel {channel:02d}/24 : {rank}[{rank}] -> {nxt}[{nxt}] "
                    "via P2P/CUMEM/read")
        if k < 85:
            return f"{head}Connected all rings, use ring PXN 0 GDR 1"
        if k < 92:
            return (f"{head}comm {comm} rank {rank} nRanks 8 nNodes 1 localRanks 8 "
                    f"localRank {rank} MNNVL 0")
        if k < 97:
            return f"{head}NCCL_SOCKET_IFNAME set by environment to eth0"
        return (f"{head}ncclCommInitRank comm {comm} rank {rank} nranks 8 cudaDev {rank} "
                f"nvmlDev {rank} busId {rank}b000 commId 0x9b1f{self.op:x} - Init COMPLETE")

    def nccl_init(self) -> str:
        """Communicator set-up: channel lines, and now and then a rank's `Init COMPLETE`."""
        host, pid, rank = self.rng.choice(self.ranks)
        head = f"{host}:{pid}:{pid + 31} [{rank}] NCCL INFO "
        self.op += 1
        if self.rng.randrange(100) < 3:
            return (f"{head}comm 0x55d4c8a{rank}b0 rank {rank} nranks 8 cudaDev {rank} "
                    f"nvmlDev {rank} busId {rank}b000 commId 0x9b1f{self.op:x} - Init COMPLETE")
        channel, nxt = self.rng.randrange(24), (rank + 1) % 8
        return f"{head}Channel {channel:02d}/24 : {rank}[{rank}] -> {nxt}[{nxt}] via P2P/CUMEM/read"

    def batch(self) -> str:
        self.batches += 1
        return f"(WorkerDict pid=3001) Processing batch {self.batches}"

    def vllm(self) -> str:
        self.second += 5
        r = self.rng
        prompt, gen, running = r.uniform(0, 9000), r.uniform(0, 3000), r.randrange(64)
        pending, kv = r.randrange(8), r.uniform(0, 99)
        return (f"INFO {self.stamp()[5:]} [metrics.py:455] Avg prompt throughput: "
                f"{prompt:.1f} tokens/s, Avg generation throughput: {gen:.1f} tokens/s, "
                f"Running: {running} reqs, Swapped: 0 reqs, Pending: {pending} reqs, "
                f"GPU KV cache usage: {kv:.1f}%, CPU KV cache usage: 0.0%.")

    def verl_step(self) -> str:
        self.step += 1
        r = self.rng
        loss, entropy, grad = r.gauss(0, 1), r.uniform(0, 2), r.uniform(0, 5)
        score, length = r.uniform(-1, 1), r.uniform(100, 900)
        gen, update = r.uniform(5, 60), r.uniform(5, 60)
        return (f"(TaskRunner pid=41{self.step % 7}) step:{self.step} - actor/pg_loss:{loss:.4f} "
                f"- actor/entropy:{entropy:.4f} - actor/grad_norm:{grad:.3f} "
                f"- critic/score/mean:{score:.4f} - response_length/mean:{length:.1f} "
                f"- timing_s/gen:{gen:.3f} - timing_s/update_actor:{update:.3f}")

    def worker(self) -> str:
        r = self.rng
        name = r.choice(("WorkerDict", "vLLMHttpServer", "TaskRunner"))
        msg = r.choice(WORKER_MESSAGES).format(n=self.n, k=r.randrange(8))
        return f"({name} pid={3000 + r.randrange(16)}, ip=10.0.0.{r.randrange(4)}) {msg}"

    def tqdm_redraws(self) -> str:
        """One physical line of several `\\r` redraws of a tqdm bar (non-ASCII blocks)."""
        parts = []
        for _ in range(self.rng.randrange(1, 6)):
            self.tqdm = (self.tqdm + 1) % 1000
            filled = self.tqdm * BAR_WIDTH // 1000
            bar = "\u2588" * filled + " " * (BAR_WIDTH - filled)
            parts.append(f"Training Progress: {self.tqdm // 10:3d}%|{bar}| {self.tqdm}/1000 "
                         f"[01:23<10:12,  1.44it/s]")
        return "\r".join(parts)

    def markers(self) -> Iterator[str]:
        """A weight sync between training steps."""
        yield f"{self.stamp()} [SYNC] Starting weight synchronization"
        yield f"{self.stamp()} [SYNC] weight sync done in 2.31s"

    def prologue(self) -> Iterator[str]:
        yield f"{self.stamp()} Generating train split: 100%|##########| 50000/50000"
        yield f"(WorkerDict pid=3001) {self.stamp()} [ACTOR] init_model START"
        yield f"(WorkerDict pid=3001) {self.stamp()} [ACTOR] init_model DONE"
        yield f"(WorkerDict pid=3002) {self.stamp()} [ROLLOUT] init_model START"
        yield f"(WorkerDict pid=3002) {self.stamp()} [ROLLOUT] init_model DONE"
        yield f"(TaskRunner pid=410) {self.stamp()} Starting training loop"

    def lines(self, mix: dict[str, int]) -> Iterator[str]:
        """Endless lines; `mix` gives each kind's share."""
        kinds = list(mix)
        bounds = []
        total = 0
        for kind in kinds:
            total += mix[kind]
            bounds.append(total)
        makers = {"nccl": self.nccl, "nccl-init": self.nccl_init, "worker": self.worker,
                  "vllm": self.vllm, "tqdm": self.tqdm_redraws, "step": self.verl_step,
                  "batch": self.batch}
        yield from self.prologue()
        while True:
            self.n += 1
            kind = kinds[bisect.bisect_right(bounds, self.rng.randrange(total))]
            if kind == "markers":
                yield from self.markers()
            else:
                yield makers[kind]()


def generate(path: Path, size: int, seed: int = 1, *, mix: str = "nccl-info",
             finish: bool = True) -> int:
    """Write about `size` bytes of log to `path`; return the byte count written."""
    writer = LogWriter(seed)
    written = 0
    batch: list[str] = []
    batched = 0  # bytes of the batch, as written
    with path.open("wb") as fh:
        for line in writer.lines(MIXES[mix]):
            batch.append(line)
            batched += len(line.encode()) + 1
            if len(batch) == 4096 or written + batched >= size:
                fh.write(("\n".join(batch) + "\n").encode())
                written += batched
                batch.clear()
                batched = 0
                if written >= size:
                    break
        if finish:
            data = f"{writer.stamp()} Training finished\n".encode()
            fh.write(data)
            written += len(data)
    return written
