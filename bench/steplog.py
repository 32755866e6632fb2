"""Per-step pipeline logs shaped like a verl-GKD run, for the catch-up benchmarks and tests.

    NCCL INFO at start-up (8 ranks, each with its own stable host:pid), then every training
    step: a rollout (vLLM metrics lines and a `Processed prompts` bar), a weight sync with
    its actor and rollout sides, an actor update, the verl `step:N - ...` line and the
    `Training Progress` bar. Filler (Ray worker chatter, NCCL op lines) pads each step so that
    a phase or step event comes about every `density` lines.

With `stop_in` the log ends inside that phase of the last step, with no line after it: the
place an attached watcher must name. The same arguments always give the same bytes.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

RANKS = 8
HOSTS = [f"gpu-node-{i:02d}" for i in range(2)]
EVENTS_PER_STEP = 11  # the lines of `_step` that open or close a phase or step
FIXED_PER_STEP = 16  # lines of a step besides the filler
BAR = 20


@dataclass(frozen=True)
class StopIn:
    """Where the log ends: the phase (and step inside it) left open, on its last line."""

    phase: str
    step: str | None = None


# Where a generated log can end, and what it leaves open.
STOPS = {
    "rollout": StopIn("rollout_generate"),
    "sync-rollout": StopIn("weight_sync", "sync_rollout_weights"),
    "update": StopIn("actor_update"),
}


class StepLog:
    def __init__(self, seed: int = 1, density: int = 25) -> None:
        self.rng = random.Random(seed)
        self.density = max(density, 2)
        self.second = 0
        self.op = 0
        self.step = 0
        self.ranks = [(HOSTS[r // 4], 31000 + 113 * r, r) for r in range(RANKS)]

    def stamp(self) -> str:
        self.second += 1
        s = self.second
        return f"2026-01-11 {s // 3600 % 24:02d}:{s // 60 % 60:02d}:{s % 60:02d}"

    def nccl(self, rank: int | None = None) -> str:
        host, pid, r = self.ranks[self.rng.randrange(RANKS) if rank is None else rank]
        self.op += 1
        head = f"{host}:{pid}:{pid + 40 + self.op % 4} [{r}] NCCL INFO "
        k = self.rng.randrange(4)
        if k == 0:
            return (f"{head}Channel {self.op % 24:02d}/24 : {r}[{r}] -> {(r + 1) % RANKS}"
                    f"[{(r + 1) % RANKS}] via P2P/CUMEM/read")
        if k == 1:
            return f"{head}Connected all rings, use ring PXN 0 GDR 1"
        if k == 2:
            return (f"{head}AllReduce: opCount {self.op:x} sendbuff 0x7f{self.op * 4096:010x} "
                    f"count {self.rng.choice((1, 4096, 262144))} datatype 7 op 0 root 0 "
                    f"comm 0x55d4c8a{r}b0 [nranks={RANKS}] stream 0x55d4c9f{r}00")
        return (f"{head}comm 0x55d4c8a{r}b0 rank {r} nRanks {RANKS} nNodes {len(HOSTS)} "
                f"localRanks 4 localRank {r % 4} MNNVL 0")

    def startup(self) -> Iterator[str]:
        for r in range(RANKS):
            for _ in range(60):
                yield self.nccl(r)
            host, pid, _ = self.ranks[r]
            yield (f"{host}:{pid}:{pid + 40} [{r}] NCCL INFO ncclCommInitRank comm "
                   f"0x55d4c8a{r}b0 rank {r} nranks {RANKS} cudaDev {r % 4} busId {r}b000 "
                   f"commId 0x9b1f - Init COMPLETE")
        yield f"(WorkerDict pid=3001) {self.stamp()} [ACTOR] init_model START"
        yield f"(WorkerDict pid=3001) {self.stamp()} [ACTOR] init_model DONE"
        yield f"(WorkerDict pid=3002) {self.stamp()} [ROLLOUT] init_model START"
        yield f"(WorkerDict pid=3002) {self.stamp()} [ROLLOUT] init_model DONE"

    def filler(self, n: int) -> Iterator[str]:
        """Lines that change nothing: Ray worker chatter and NCCL op lines."""
        for _ in range(n):
            k = self.rng.randrange(10)
            if k < 6:
                yield self.nccl()
            elif k < 8:
                yield (f"(vLLMHttpServer pid=3{self.rng.randrange(100, 116)}, ip=10.0.0.2) "
                       f"INFO: 10.0.0.{k}:4{k}12 - \"POST /v1/completions HTTP/1.1\" 200 OK")
            else:
                yield (f"(WorkerDict pid=3{self.rng.randrange(1, 9):03d}, ip=10.0.0.1) "
                       f"INFO Finished request chatcmpl-{self.op}.")

    def metrics(self) -> str:
        r = self.rng
        return (f"(vLLMHttpServer pid=3101) INFO {self.stamp()[5:]} [metrics.py:455] Avg "
                f"prompt throughput: {r.uniform(0, 9000):.1f} tokens/s, Avg generation "
                f"throughput: {r.uniform(0, 3000):.1f} tokens/s, Running: {r.randrange(64)} "
                f"reqs, Swapped: 0 reqs, Pending: {r.randrange(8)} reqs, GPU KV cache usage: "
                f"{r.uniform(0, 99):.1f}%, CPU KV cache usage: 0.0%.")

    def bar(self, label: str, done: int, total: int) -> str:
        filled = done * BAR // total
        return (f"{label}: {done * 100 // total:3d}%|{'#' * filled}{' ' * (BAR - filled)}| "
                f"{done}/{total} [00:{done % 60:02d}<00:10, 3.1it/s]")

    def steps(self, stop: StopIn | None = None, count: int | None = None) -> Iterator[str]:
        """Training steps, endless unless `count`; the filler between the step's lines
        keeps one event every `density` lines."""
        pad = max(0, self.density * EVENTS_PER_STEP - FIXED_PER_STEP)
        share = [pad // 8] * 8
        share[0] += pad - sum(share)
        while count is None or self.step < count:
            self.step += 1
            yield from self._step(share)
        if stop is not None:
            self.step += 1
            yield from self._step(share, stop)

    def _step(self, share: list[int], stop: StopIn | None = None) -> Iterator[str]:
        worker = "(WorkerDict pid=3002)"
        yield f"{worker} {self.stamp()} [ROLLOUT] generate_sequences START"
        for i in range(3):
            yield from self.filler(share[i])
            yield self.metrics()
        yield f"(vLLMHttpServer pid=3101) {self.bar('Processed prompts', 64, 64)}"
        if stop == STOPS["rollout"]:
            return
        yield f"{worker} {self.stamp()} [ROLLOUT] generate_sequences DONE"
        yield from self.filler(share[3])
        yield f"(WorkerDict pid=3001) {self.stamp()} [SYNC] Starting weight synchronization"
        yield f"(WorkerDict pid=3001) {self.stamp()} [SYNC] Syncing actor weights"
        yield from self.filler(share[4])
        yield f"(WorkerDict pid=3001) {self.stamp()} [SYNC] Actor sync done"
        yield f"(WorkerDict pid=3002) {self.stamp()} [SYNC] Waiting for rollout weights"
        yield from self.filler(share[5])
        if stop == STOPS["sync-rollout"]:
            return
        yield f"(WorkerDict pid=3002) {self.stamp()} [SYNC] Rollout weights received"
        yield f"(WorkerDict pid=3001) {self.stamp()} [SYNC] weight sync done in 2.31s"
        yield f"(WorkerDict pid=3001) {self.stamp()} [ACTOR] update_actor START"
        yield from self.filler(share[6])
        if stop == STOPS["update"]:
            return
        yield f"(WorkerDict pid=3001) {self.stamp()} [ACTOR] update_actor DONE"
        r = self.rng
        yield (f"(TaskRunner pid=410) step:{self.step} - actor/pg_loss:{r.gauss(0, 1):.4f} - "
               f"actor/grad_norm:{r.uniform(0, 5):.3f} - response_length/mean:"
               f"{r.uniform(100, 900):.1f} - timing_s/gen:{r.uniform(5, 60):.3f}")
        yield f"(TaskRunner pid=410) {self.bar('Training Progress', self.step % 1000, 1000)}"
        yield from self.filler(share[7])


def generate(path: Path, size: int, *, seed: int = 1, density: int = 25,
             stop: str | None = "sync-rollout") -> int:
    """Write at least `size` bytes (whole steps) to `path`, ending as `stop` says (None: a
    finished step); return the number of training steps written."""
    log = StepLog(seed, density)
    written = 0
    with path.open("wb") as fh:
        batch = list(log.startup())
        batched = sum(len(line.encode()) + 1 for line in batch)  # bytes of the batch
        for line in log.steps():
            batch.append(line)
            batched += len(line.encode()) + 1
            full = len(batch) >= 4096 or written + batched >= size
            if full and line.startswith("(TaskRunner pid=410) Training"):  # a step's end
                fh.write(("\n".join(batch) + "\n").encode())
                written += batched
                batch.clear()
                batched = 0
                if written >= size:
                    break
        steps = log.step
        tail = list(log.steps(STOPS[stop], count=steps)) if stop else []
        fh.write(("\n".join(batch + tail) + "\n").encode() if batch or tail else b"")
    return steps + (1 if stop else 0)
