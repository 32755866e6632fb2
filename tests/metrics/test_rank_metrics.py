"""Per-rank metrics over real HTTP from a real `watch` process: seconds since each rank's
progress for the 64 lowest rank numbers, and rank="other" for the most idle of the rest."""

from __future__ import annotations

import time
from pathlib import Path

from tests.fakes.hangwatch_proc import Hangwatch
from tests.fakes.receiver import free_port
from tests.metrics.test_metrics_server import scrape, wait_until

RANKS = 70
NAME = "hangwatch_rank_seconds_since_progress"


def steps(step: int, ranks: range | list[int]) -> str:
    return "".join(f"[rank{r}]: step {step} loss 0.5\n" for r in ranks)


def rank_series(samples) -> dict[str, float]:
    return {dict(labels)["rank"]: v for (name, labels), v in samples.items() if name == NAME}


def test_rank_idle_series_are_bounded_and_name_the_rank_behind(tmp_path: Path):
    log = tmp_path / "train.log"
    log.write_text("[rank0]: world_size=70\n" + steps(1, range(RANKS)))
    port = free_port()
    hw = Hangwatch("watch", str(log), "--stall", "10m", "--no-snapshot", "--json",
                   "--metrics", f"127.0.0.1:{port}", "--name", "job",
                   "--report-dir", str(tmp_path / "r"))
    try:
        hw.next_event("caught_up")  # the log is read, the metrics server listens
        assert wait_until(lambda: len(rank_series(scrape(port))) == 65)
        time.sleep(1.5)
        moving = [r for r in range(RANKS) if r not in (3, 66)]
        with log.open("a") as fh:
            fh.write(steps(2, moving))
        samples = wait_until(lambda: (s := scrape(port)) and rank_series(s)["0"] < 1.0 and s)
    finally:
        assert hw.stop() == 0, hw.output()
    series = rank_series(samples)
    assert sorted(series, key=lambda r: (r == "other", r.zfill(3))) == [
        *(str(r) for r in range(64)), "other"]
    assert series["3"] >= 1.5 and series["other"] >= 1.5  # rank 66 is among the others
    assert max(v for r, v in series.items() if r not in ("3", "other")) < 1.0
    assert all(set(dict(labels)) <= {"watch", "rank"} for (name, labels) in samples
               if name == NAME)
