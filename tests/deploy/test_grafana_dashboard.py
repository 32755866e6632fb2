"""The Grafana dashboard parses and queries only what hangwatch exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from hangwatch.metrics.server import NAMES

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "hangwatch.json"


def queries(dashboard: dict) -> list[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in dashboard["templating"]["list"]
              if isinstance(v.get("query"), dict)]
    return exprs


def test_the_dashboard_is_json_with_unique_panel_ids():
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)) and dashboard["uid"] == "hangwatch"


def test_the_dashboard_uses_only_exported_metrics_and_shows_each_of_them():
    used: set[str] = set()
    for expr in queries(json.loads(DASHBOARD.read_text())):
        names = set(re.findall(r"\bhangwatch_[a-z_]+\b", expr))
        assert names, f"a query with no hangwatch metric: {expr}"
        used |= names
    assert used <= set(NAMES), used - set(NAMES)
    assert used == set(NAMES), set(NAMES) - used
