"""The shipped Prometheus rules: valid, tested with `promtool test rules`, and written
against metric names hangwatch really exports."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from hangwatch.metrics.server import NAMES

FOLDER = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
RULES = FOLDER / "hangwatch.rules.yml"
TESTS = FOLDER / "hangwatch.rules.test.yml"
ALERTS = {"HangwatchStalled", "HangwatchBlind", "HangwatchDown",
          "HangwatchAlertDeliveryFailing", "HangwatchPhaseDisagreement", "HangwatchNodeBehind",
          "HangwatchRankBehind"}


def promtool() -> str:
    """promtool comes from Debian's `prometheus` package; .ci/run installs it. Only a machine
    that truly lacks it skips, and never in CI."""
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing in CI: apt-get install prometheus")
        pytest.skip("promtool not installed (apt-get install prometheus)")
    return found


def rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def test_the_rule_file_has_each_alert_once():
    assert sorted(r["alert"] for r in rules()) == sorted(ALERTS)


def test_rules_use_only_exported_metric_names():
    for rule in rules():
        used = set(re.findall(r"\bhangwatch_[a-z_]+\b", rule["expr"]))
        assert used <= set(NAMES), (rule["alert"], used - set(NAMES))


def test_every_alert_has_a_firing_unit_test():
    tested = {case["alertname"] for test in yaml.safe_load(TESTS.read_text())["tests"]
              for case in test.get("alert_rule_test", []) if case["exp_alerts"]}
    assert tested == ALERTS


def test_promtool_checks_the_rules():
    result = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_unit_tests_pass():
    result = subprocess.run([promtool(), "test", "rules", TESTS.name], capture_output=True,
                            text=True, timeout=120, cwd=FOLDER)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr
