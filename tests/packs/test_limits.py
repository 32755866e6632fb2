"""A rule file from anywhere cannot make loading or matching slow or big: alias bombs, huge
files, overlong and too many patterns are refused with file:line, and a catastrophic pattern
costs one bounded search per line."""

from __future__ import annotations

import io
import time
import tracemalloc
from pathlib import Path

import pytest

from hangwatch.core import rules as rules_module
from hangwatch.core.clock import FakeClock
from hangwatch.core.engine import Engine
from hangwatch.core.prefilter import build_prefilter
from hangwatch.core.rules import RuleSet
from hangwatch.errors import ConfigErrors
from hangwatch.packs.load import (
    load_builtin_packs,
    load_pack_file,
    load_pack_text,
)
from hangwatch.packs.parse import MAX_PATTERN_CHARS, MAX_PATTERNS
from hangwatch.storage.yamlfile import MAX_VALUES

BOMB = """\
pack: laughs
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
signals:
  - id: boom
    match: 'x'
    advice: [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""


def test_yaml_alias_bomb_is_refused_in_bounded_time_and_memory():
    tracemalloc.start()
    started = time.monotonic()
    with pytest.raises(ConfigErrors) as caught:
        load_pack_text(BOMB, "bomb.yaml")
    elapsed = time.monotonic() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert elapsed < 2.0 and peak < 20 * 1024 * 1024
    message = str(caught.value)
    assert message.startswith("bomb.yaml:") and f"more than {MAX_VALUES} values" in message


def test_aliases_of_reasonable_size_still_load():
    pack = load_pack_text("pack: mine\nsignals:\n  - id: a\n    match: 'x'\n    advice: &adv\n"
                          "      - restart it\n  - id: b\n    match: 'y'\n    advice: *adv\n",
                          "ok.yaml")
    assert [s.advice for s in pack.signals] == [("restart it",), ("restart it",)]


def test_overlong_pattern_is_refused_with_file_line_and_rule():
    long = "a" * (MAX_PATTERN_CHARS + 1)
    with pytest.raises(ConfigErrors) as caught:
        load_pack_text(f"pack: mine\nsignals:\n  - id: big\n    match: '{long}'\n", "big.yaml")
    assert str(caught.value).startswith(
        f"big.yaml:4: rule big: pattern in `match` is {MAX_PATTERN_CHARS + 1} characters long")


def test_too_many_patterns_is_one_clear_error():
    rules = "".join(f"  - id: r{i}\n    match: 'x{i}'\n" for i in range(MAX_PATTERNS + 5))
    with pytest.raises(ConfigErrors) as caught:
        load_pack_text(f"pack: mine\nnoise:\n{rules}", "many.yaml")
    [error] = caught.value.errors
    assert error.file == "many.yaml" and error.line > 2
    assert f"more than {MAX_PATTERNS} patterns" in error.message


def test_huge_rule_file_is_refused_before_parsing(tmp_path: Path):
    path = tmp_path / "huge.yaml"
    path.write_text("pack: mine\n# " + "x" * (2 << 20) + "\n")
    with pytest.raises(ConfigErrors, match=r"huge\.yaml: larger than 1024 KiB"):
        load_pack_file(path)


CATASTROPHIC = """\
pack: slow
signals:
  - id: backtracks
    severity: warning
    match: '(\\w+\\s?)+$'
"""


@pytest.mark.parametrize("prefiltered", [False, True], ids=["regex", "prefilter"])
def test_catastrophic_pattern_on_a_long_line_costs_one_bounded_search(prefiltered):
    rules = RuleSet([*load_builtin_packs(), load_pack_text(CATASTROPHIC, "slow.yaml")])
    prefilter = build_prefilter(rules) if prefiltered else None
    engine = Engine(rules, default_stall=60, clock=FakeClock(), prefilter=prefilter)
    line = ("word " * 20_000 + "!\n").encode()  # 100 kB that the pattern backtracks over
    started = time.monotonic()
    engine.feed_block("job.log", line * 3 + b"step 1 done\n")
    elapsed = time.monotonic() - started
    # Matched line by line, each search is cut at the timeout (on a loaded machine a
    # built-in pattern's search of such a line may be cut too); Hyperscan, where it can take
    # the pattern whole, never backtracks at all.
    if prefiltered and prefilter is not None:
        assert rules.timeouts == 0
    else:
        assert rules.timeouts >= 3
    # Unbounded, these searches would take minutes: a loaded machine adds seconds at most.
    assert elapsed < 3 * rules_module.MATCH_TIMEOUT_S + 5.0
    assert engine.state()["lines"] == {"job.log": 4}


@pytest.mark.parametrize("command", [["check", "LOG"], ["LOG"], ["rules", "lint"]])
def test_a_rule_file_over_a_cap_is_refused_by_every_command_naming_file_rule_and_cap(
        tmp_path: Path, command: list[str]):
    from hangwatch.cli import main

    log = tmp_path / "train.log"
    log.write_text("step 1\n")
    big = tmp_path / "big.yaml"
    long = "a" * (MAX_PATTERN_CHARS + 1)
    big.write_text(f"pack: big\nsignals:\n  - id: long_one\n    match: '{long}'\n")
    many = tmp_path / "many.yaml"
    many.write_text("pack: many\nsignals:\n" + "".join(
        f"  - id: r{i}\n    match: 'x{i}'\n" for i in range(MAX_PATTERNS + 1)))
    for rules, rule, cap in ((big, "long_one", f"more than {MAX_PATTERN_CHARS}"),
                             (many, f"r{MAX_PATTERNS}", f"more than {MAX_PATTERNS} patterns")):
        argv = [str(log) if a == "LOG" else a for a in command]
        argv = [*argv, str(rules)] if command == ["rules", "lint"] else [*argv, "--rules",
                                                                          str(rules)]
        out, err = io.StringIO(), io.StringIO()
        assert main(argv, out=out, err=err) == 2
        said = out.getvalue() + err.getvalue()
        assert f"{rules}:" in said and f"rule {rule}:" in said and cap in said, said
