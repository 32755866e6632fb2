"""Fixtures of the core tests."""

from __future__ import annotations

import pytest

from hangwatch.core.prefilter import Prefilter, try_build
from hangwatch.core.rules import RuleSet
from hangwatch.packs.load import load_rule_set


@pytest.fixture(scope="module")
def builtin() -> tuple[RuleSet, Prefilter]:
    """The built-in rule set and its block matcher (the test skips without Hyperscan)."""
    pytest.importorskip("hyperscan")
    rules = load_rule_set()
    prefilter, status = try_build(rules)
    assert prefilter is not None, status
    return rules, prefilter
