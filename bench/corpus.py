"""Accuracy on real hang logs: right phase or signal with every pack, and with the framework's
own pack left out; healthy excerpts that must not be called stalled.

    python bench/corpus.py [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.corpus.harness import NO_PACK, Tally, load_index, measure, percent


def row(name: str, t: Tally) -> str:
    on = f"{t.packs_on}/{t.n} ({percent(t.packs_on, t.n):.0f}%)" if t.n else "-"
    out = f"{t.leave_one_out}/{t.n} ({percent(t.leave_one_out, t.n):.0f}%)" if t.n else "-"
    healthy = f"{t.healthy_right}/{t.healthy}" if t.healthy else "-"
    return f"| {name} | {t.n} | {on} | {out} | {healthy} |"


def as_json(tallies: dict[str, Tally]) -> dict[str, object]:
    return {name: {"n": t.n, "packs_on": t.packs_on, "leave_one_out": t.leave_one_out,
                   "healthy": t.healthy, "healthy_right": t.healthy_right,
                   "wrong": [{"file": o.entry.file, "run": label, "reported": o.reported(),
                              "expected": sorted(o.entry.phases | o.entry.signals)}
                             for label, o in t.wrong]}
            for name, t in tallies.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    tallies = measure(load_index())
    if args.json:
        print(json.dumps(as_json(tallies), indent=2))
        return 0
    print("| framework | hangs | right, packs on | right, own pack left out | healthy right |")
    print("|---|---|---|---|---|")
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
