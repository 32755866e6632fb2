"""Two multiprocessing workers take two locks in opposite orders: a classic deadlock. The
parent waits for them in join()."""

from __future__ import annotations

import multiprocessing as mp
import time

from jobkit import record_pid


def worker(name: str, first: mp.synchronize.Lock, second: mp.synchronize.Lock,
           ready: mp.synchronize.Barrier) -> None:
    record_pid()
    with first:
        print(f"worker {name}: holding its first lock")
        ready.wait()  # both hold one lock now: neither can take the other
        with second:
            print(f"worker {name}: never printed")


def main() -> None:
    record_pid()
    for step in range(3):
        print(f"preparing shard {step}")
        time.sleep(0.2)
    a, b = mp.Lock(), mp.Lock()
    ready = mp.Barrier(2)
    workers = [mp.Process(target=worker, args=("A", a, b, ready)),
               mp.Process(target=worker, args=("B", b, a, ready))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


if __name__ == "__main__":
    main()
