"""hangwatch benchmarks: one command, a table of figures, exit status 1 when a goal is missed.

    python bench/run.py            # full sizes: 1 GiB catch-up, 200 MiB per-step log,
                                   # 20 s follow, 60 s quiet
    python bench/run.py --quick    # 50 MiB catch-up, 20 MiB per-step, shorter runs: for iterating
    python bench/run.py --long     # full, with a 10-minute follow (memory stays flat)
    python bench/run.py --only catch-up,start-up

Generated logs go to a temporary directory that is removed at the end. Figures are medians
of several runs with the range in parentheses; ratios are to a reference measured in the
same run. The catch-up also checks that the prefilter leaves every event unchanged.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import attach
import catchup
import live
import quiet
import snap
import startup
from common import Row, note, render

BENCHES = ("catch-up", "per-step", "follow", "quiet", "start-up", "snapshot")
CORRECTNESS = ("same events", "lines processed", "processes found")  # rows not about time


@dataclass(frozen=True)
class Sizes:
    catchup_mb: int
    steps_mb: int
    runs: int
    verify_kb: int  # of each log, read line by line too: the same events?
    follow_s: float
    rotate_s: float
    stall_s: float
    startup_runs: int
    snapshot_runs: int


SIZES = {
    "full": Sizes(1024, 200, 3, 32 << 10, 20, 0, 60, 20, 5),
    "long": Sizes(1024, 200, 3, 32 << 10, 600, 60, 60, 20, 5),
    "quick": Sizes(50, 20, 3, 4 << 10, 5, 0, 10, 10, 3),
    # the smoke's comparison is a check that it runs: tests/core hold the finders equal
    "smoke": Sizes(2, 2, 1, 64, 1, 0, 2, 2, 1),
}


def environment() -> str:
    import hyperscan

    grep = subprocess.run(["grep", "--version"], capture_output=True, text=True).stdout
    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
            f"Python {platform.python_version()}, hyperscan {hyperscan.__version__}, "
            f"{grep.splitlines()[0] if grep else 'grep ?'}, "
            f"LANG={os.environ.get('LANG', '')}, {time.strftime('%Y-%m-%d')}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small sizes, for iterating")
    size.add_argument("--long", action="store_true", help="a 10-minute follow")
    size.add_argument("--smoke", action="store_true",
                      help="tiny sizes; only correctness can fail (for the test suite)")
    parser.add_argument("--only", default=",".join(BENCHES),
                        help=f"comma-separated subset of {', '.join(BENCHES)}")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the rows here")
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "long" if args.long else "smoke" if args.smoke else "full"
    sizes = SIZES[mode]
    chosen = [b.strip() for b in args.only.split(",") if b.strip()]
    unknown = set(chosen) - set(BENCHES)
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="hangwatch-bench-") as tmp:
        for name in chosen:
            note(f"{name} ({mode})")
            rows += run_one(name, Path(tmp), sizes, smoke=args.smoke)
    print(f"{mode} run: {environment()}")
    print(render(rows))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
    missed = [r for r in rows if r.ok is False
              and (not args.smoke or any(c in r.measure for c in CORRECTNESS))]
    for r in missed:
        print(f"goal missed: {r.bench}: {r.measure}: {r.value} (goal {r.goal})", file=sys.stderr)
    return 1 if missed else 0


def run_one(name: str, tmp: Path, sizes: Sizes, *, smoke: bool) -> list[Row]:
    if name == "catch-up":
        return catchup.run(tmp, sizes.catchup_mb << 20, sizes.runs, sizes.verify_kb << 10)
    if name == "per-step":
        return attach.run(tmp, sizes.steps_mb << 20, sizes.runs)
    if name == "follow":
        return live.run(tmp, sizes.follow_s, rotate_every=sizes.rotate_s)
    if name == "quiet":
        return quiet.run(tmp, sizes.stall_s)
    if name == "start-up":
        return startup.run(sizes.startup_runs)
    return snap.run(sizes.snapshot_runs, processes=4 if smoke else snap.PROCESSES,
                    bound_s=1.0 if smoke else snap.BOUND_S)


if __name__ == "__main__":
    sys.exit(main())
