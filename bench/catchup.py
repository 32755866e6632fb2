"""Benchmark 1 (and 4, memory): read a big log once, against grep with the same patterns;
and `hangwatch rules test` on the same log, against `hangwatch check`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import loggen
import manyrules
import patterns
from common import PYTHON, Row, Series, note, run_timed
from verify import compare

from hangwatch.core.prefilter import Prefilter, try_build
from hangwatch.core.rules import RuleSet
from hangwatch.packs.load import load_rule_set

RATIO_GOAL = 1.5
RULES_TEST_GOAL = 3.0  # `rules test` against `check`, both run as a user runs them
RSS_GOAL_MB = 80.0
MIXES = ("progress", "nccl-info", "dense")  # the goal holds for the first two
SAMPLED = 27  # rule patterns of the kind a log needs, for a smaller grep reference


def warm(log: Path) -> None:
    """Read the file once so every contender finds it in the page cache."""
    with log.open("rb") as fh:
        while fh.read(1 << 24):
            pass


def run(tmp: Path, size: int, runs: int, verify_bytes: int) -> list[Row]:
    rules = load_rule_set()
    prefilter, status = try_build(rules)
    note(f"prefilter: {status}")
    cache = {"HANGWATCH_CACHE_DIR": str(tmp / "cache")}
    rows: list[Row] = [setup_row(tmp, cache)]  # after it, the databases are cached
    for mix in MIXES:
        log = tmp / f"{mix}.log"
        note(f"writing {size >> 20} MiB {mix} log")
        loggen.generate(log, size, mix=mix)
        warm(log)
        sampled = patterns.export_ere(tmp, patterns.sample_patterns(log, SAMPLED),
                                      f"{mix}.ere")
        references = {**grep_references(tmp), f"grep -E, {SAMPLED} patterns ({locale_name()})":
                      (patterns.grep_argv("E", sampled), {})}
        what = f"{size >> 20} MiB {mix}"
        fast, rss = Series(), Series()
        cli = {"check": Series(), "rules test": Series()}
        greps = {label: Series() for label in references}
        for i in range(runs):  # interleaved, so that noise from other work hits all alike
            note(f"{mix} run {i + 1}/{runs}")
            for label, (argv, env) in references.items():
                g = run_timed([*argv, str(log)], env=env)
                if g.rc not in (0, 1):
                    raise RuntimeError(f"{label} failed: {g.stderr.strip()}")
                greps[label].add(g.wall)
            f = run_timed([PYTHON, "bench/catchup_worker.py", str(log)], env=cache)
            if f.rc != 0:
                raise RuntimeError(f"catch-up failed: {f.stderr}")
            fast.add(f.wall)
            rss.add(f.max_rss_mb)
            for command, series in cli.items():
                c = run_timed([PYTHON, "-m", "hangwatch", *command.split(), str(log)], env=cache)
                if c.rc not in (0, 3):
                    raise RuntimeError(f"{command} failed: {c.stderr}")
                series.add(c.wall)
        rows += ratio_rows(what, fast, greps, goal=mix != "dense")
        ratio = cli["rules test"].median / cli["check"].median
        rows.append(Row("rules test", f"{what}: `rules test` vs `check`",
                        cli["rules test"].text(), cli["check"].text(), f"{ratio:.2f}x",
                        f"<= {RULES_TEST_GOAL:g}x", ratio <= RULES_TEST_GOAL))
        rows.append(Row("memory", f"{what}: peak RSS of check", rss.text("MB", 0), "", "",
                        f"< {RSS_GOAL_MB:.0f} MB", max(rss.values) < RSS_GOAL_MB))
        if prefilter is not None:
            rows.append(verify_row(rules, prefilter, log, what, verify_bytes))
    return [*rows, *manyrules.run()]


def setup_row(tmp: Path, cache: dict[str, str]) -> Row:
    """Time to a ready rule set: the first run compiles the Hyperscan databases, later runs
    load them from the cache folder."""
    tiny = tmp / "tiny.log"
    tiny.write_text("step:1 - loss:0.5\n")
    ready = []
    for _ in range(2):
        done = run_timed([PYTHON, "bench/catchup_worker.py", str(tiny)], env=cache)
        if done.rc != 0:
            raise RuntimeError(f"catch-up failed: {done.stderr}")
        ready.append(json.loads(done.stdout)["setup_s"])
    return Row("catch-up", "rules ready: first run (compiling) / later runs (cached)",
               f"{ready[0]:.2f} s / {ready[1]:.2f} s")


def grep_references(tmp: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    """grep commands (the log goes last) counting the lines the rules hit: -P and -E in the
    user's locale, and -E with LC_ALL=C, where grep matches bytes and runs fastest."""
    locale = locale_name()
    files = patterns.export(tmp)
    out = {f"grep -{mode} ({locale})": (patterns.grep_argv(mode, path), {})
           for mode, path in files.items()}
    if "E" in files and locale != "C":
        out["grep -E (C)"] = (patterns.grep_argv("E", files["E"]), {"LC_ALL": "C"})
    return {label: command for label, command in out.items() if _takes(label, *command)}


def _takes(label: str, argv: list[str], env: dict[str, str]) -> bool:
    """Whether grep compiles these patterns at all (grep -P refuses a regular expression
    past its size limit, which every rule joined in one can pass): else said, and left out."""
    tried = run_timed([*argv, os.devnull], env=env)
    if tried.rc in (0, 1):
        return True
    note(f"{label}: left out: {tried.stderr.strip()}")
    return False


def locale_name() -> str:
    return os.environ.get("LC_ALL") or os.environ.get("LANG") or "C"


def ratio_rows(what: str, fast: Series, greps: dict[str, Series], *, goal: bool) -> list[Row]:
    """The goal is against the faster grep in the user's locale; the C locale is shown."""
    local = {k: v for k, v in greps.items() if not k.endswith("(C)")}
    best = min(local, key=lambda k: local[k].median)
    rows = []
    for label, ref in sorted(greps.items(), key=lambda kv: kv[0] != best):
        ratio = fast.median / ref.median
        bears = goal and label == best
        rows.append(Row("catch-up", f"{what}: check vs {label}", fast.text(), ref.text(),
                        f"{ratio:.2f}x", f"<= {RATIO_GOAL}x" if bears else "",
                        ratio <= RATIO_GOAL if bears else None))
    return rows


def verify_row(rules: RuleSet, prefilter: Prefilter, log: Path, what: str,
               limit: int) -> Row:
    first = f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"
    note(f"{what}: comparing events with line-by-line matching on the first {first}")
    v = compare(rules, prefilter, log, limit)
    if not v.same:
        note(v.first_difference)
    return Row("catch-up", f"{what}: same events as line by line (first {first})",
               f"{'yes' if v.same else 'NO'}: {v.events} events, {v.lines:,} lines",
               f"line by line: {v.simple_s:.1f} s", f"{v.simple_s / v.fast_s:.0f}x",
               "identical", v.same)
