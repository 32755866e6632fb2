"""Accuracy on real hang logs: right phase or signal with every pack, and leaving each
framework out (its pack and every rule recorded as written because of it); the first-sight
figure where known; healthy excerpts that must not be called stalled.

    python bench/corpus.py [--json] [--index PATH] [--totals]

`--index` measures a batch kept elsewhere, in the same format (`index.yaml` beside the
excerpts): a batch of real hangs nobody has read rules against, the figure closest to the
next log. `--totals` prints the figures without the wrong answers, so that measuring such a
batch does not show its lines.

The headline is the leave-one-framework-out figure: it is the one that says something about a
log nobody wrote rules for. See docs/accuracy.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml

from tests.corpus.harness import (
    INDEX,
    NO_PACK,
    Tally,
    load_index,
    measure,
    percent,
    problems,
    raw_index,
)


def ratio(right: int, n: int) -> str:
    return f"{right}/{n} ({percent(right, n):.0f}%)" if n else "-"


def row(name: str, t: Tally) -> str:
    healthy = f"{t.healthy_right}/{t.healthy}" if t.healthy else "-"
    return (f"| {name} | {t.n} | {ratio(t.packs_on, t.n)} | {ratio(t.leave_one_out, t.n)} | "
            f"{ratio(t.first_right, t.first_seen)} | {healthy} | {t.left_out or '-'} |")


def as_json(tallies: dict[str, Tally]) -> dict[str, object]:
    return {name: {"n": t.n, "packs_on": t.packs_on, "leave_one_out": t.leave_one_out,
                   "left_out": t.left_out, "first_seen": t.first_seen,
                   "first_right": t.first_right,
                   "healthy": t.healthy, "healthy_right": t.healthy_right,
                   "wrong": [{"file": o.entry.file, "run": label, "reported": o.reported(),
                              "expected": sorted(o.entry.phases | o.entry.signals)}
                             for label, o in t.wrong]}
            for name, t in tallies.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--index", type=Path, default=INDEX,
                        help="the index.yaml of the excerpts to measure (default: the corpus)")
    parser.add_argument("--totals", action="store_true", help="leave the wrong answers out")
    args = parser.parse_args(argv)
    try:
        found = [p for raw in raw_index(args.index) for p in problems(raw, args.index.parent)]
    except (OSError, ValueError, yaml.YAMLError) as error:
        found = [str(error)]
    if found:
        print("\n".join(f"{args.index}: {p}" for p in found), file=sys.stderr)
        return 2
    tallies = measure(load_index(args.index))
    if args.totals:
        for t in tallies.values():
            t.wrong.clear()
    if args.json:
        print(json.dumps(as_json(tallies), indent=2))
        return 0
    print("| framework | hangs | right, packs on | right, framework left out | right at first "
          "sight | healthy right | left out |")
    print("|---|---|---|---|---|---|---|")
    for name in sorted(n for n in tallies if n not in ("all", NO_PACK)):
        print(row(name, tallies[name]))
    if NO_PACK in tallies:
        print(row(NO_PACK, tallies[NO_PACK]))
    print(row("**all**", tallies["all"]))
    wrong = tallies["all"].wrong
    if wrong:
        print(f"\nwrong ({len(wrong)}):")
        for label, o in sorted(wrong, key=lambda w: (w[1].entry.file, w[0])):
            expected = ", ".join(sorted(o.entry.phases | o.entry.signals)) or "healthy"
            print(f"  {o.entry.file} [{label}]: {o.reported()}  (expected {expected})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
