from pathlib import Path

import pytest
import regex

from hangwatch.core import rules as rules_module
from hangwatch.core.clock import FakeClock
from hangwatch.core.engine import Engine
from hangwatch.core.prefilter import build_prefilter
from hangwatch.core.rules import RuleSet
from hangwatch.packs.load import load_pack_text, load_rule_set
from hangwatch.storage.cache import default_store

PACK = """
pack: t
phases:
  - id: sync
    start: 'SYNC start'
    done: 'SYNC done'
signals:
  - id: slow
    match: '(a|aa)+b'
noise:
  - id: spew
    match: 'NCCL INFO'
"""


def test_plain_line_matches_nothing():
    rules = RuleSet([load_pack_text(PACK, "t.yaml")])
    assert rules.match("step 5 loss 0.1") is None


def test_line_can_hit_several_kinds():
    rules = RuleSet([load_pack_text(PACK, "t.yaml")])
    hit = rules.match("NCCL INFO SYNC start")
    assert hit is not None
    assert [p.id for p in hit.phase_starts] == ["sync"] and hit.noise is not None


def test_catastrophic_pattern_times_out_instead_of_freezing(monkeypatch):
    monkeypatch.setattr(rules_module, "MATCH_TIMEOUT_S", 0.01)
    rules = RuleSet([load_pack_text(PACK, "t.yaml")])
    assert rules.match("a" * 40 + "!") is None
    assert rules.timeouts == 1


def test_patterns_lists_every_line_pattern_with_its_kind():
    rules = RuleSet([load_pack_text(PACK, "t.yaml")])
    kinds = {(kind, rule_id) for kind, rule_id, _ in rules.patterns()}
    assert kinds == {("phase-start", "sync"), ("phase-done", "sync"), ("signal", "slow"),
                     ("noise", "spew")}
    for _, _, pattern in rules.patterns():
        regex.compile(pattern)


def test_a_start_compiles_only_the_rule_patterns_its_log_needs(monkeypatch):
    # The built-in packs hold over 800 patterns: compiling them all took most of a start.
    pytest.importorskip("hyperscan")
    asked: list[str] = []
    real = regex.compile
    monkeypatch.setattr(regex, "compile",
                        lambda pattern, *a, **k: asked.append(pattern) or real(pattern, *a, **k))
    rules = load_rule_set()
    sources = {c.source for _, c in rules.line_rules()}
    prefilter = build_prefilter(rules, default_store())
    assert prefilter is not None
    engine = Engine(rules, default_stall=600.0, clock=FakeClock(), prefilter=prefilter)
    log = Path(__file__).resolve().parents[1] / "fixtures" / "packs" / "verl-gkd"
    for path in sorted(log.glob("*.log")):
        engine.feed_block(path.name, path.read_bytes())
    engine.state()  # reads the tail's lines again
    assert engine.lines
    compiled = sources & set(asked)
    assert 0 < len(compiled) < len(sources) // 4, (len(compiled), len(sources))
