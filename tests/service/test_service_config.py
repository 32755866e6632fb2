"""serve's config file: the contract's keys, and every mistake named with file and line."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from hangwatch.alerts.targets import TargetSpec
from hangwatch.cli import main
from hangwatch.errors import ConfigErrors
from hangwatch.service.config import MetricsConfig, load_service_config

GOOD = """\
state_dir: /var/lib/hangwatch/state
metrics: 127.0.0.1:9464
alerts:
  - webhook: https://hooks.example.com/T000/B000/XXXX
  - alertmanager: http://alertmanager:9093
  - exec: [/usr/local/bin/page, --team, ml]
watches:
  - name: gkd-7b
    logs: ["/data/runs/gkd-7b/logs/rank*.log"]
    stall: 10m
    rules: [rules]
    report_dir: /var/lib/hangwatch/gkd-7b
    snapshot: true
    pid: []
    match: null
  - name: small
    logs: train.log
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "serve.yaml"
    path.write_text(text)
    return path


def errors(tmp_path: Path, text: str) -> list[str]:
    path = write(tmp_path, text)
    with pytest.raises(ConfigErrors) as caught:
        load_service_config(path, env={})
    return [e.render().replace(str(path), "F") for e in caught.value.errors]


def test_the_documented_config_parses_into_plain_frozen_data(tmp_path):
    config = load_service_config(write(tmp_path, GOOD), env={})
    assert config.state_dir == Path("/var/lib/hangwatch/state")
    assert config.metrics == MetricsConfig("127.0.0.1", 9464)
    assert config.alerts == (
        TargetSpec("webhook", url="https://hooks.example.com/T000/B000/XXXX"),
        TargetSpec("alertmanager", url="http://alertmanager:9093"),
        TargetSpec("exec", argv=("/usr/local/bin/page", "--team", "ml")),
    )
    gkd, small = config.watches
    assert (gkd.name, gkd.logs, gkd.stall) == ("gkd-7b", ("/data/runs/gkd-7b/logs/rank*.log",),
                                               600.0)
    assert gkd.rules == (tmp_path / "rules",)  # relative to the config file's folder
    assert (gkd.snapshot, gkd.pid, gkd.match) == (True, (), None)
    assert small.logs == (str(tmp_path / "train.log"),)
    assert small.report_dir == Path("/var/lib/hangwatch/state/reports/small")


def test_state_dir_defaults_to_systemds_state_directory(tmp_path):
    config = load_service_config(write(tmp_path, "watches: [{name: a, logs: [x.log]}]\n"),
                                 env={"STATE_DIRECTORY": "/var/lib/hangwatch/a"})
    assert config.state_dir == Path("/var/lib/hangwatch/a")


def test_every_mistake_is_named_with_its_line(tmp_path):
    found = errors(tmp_path, """\
state_dir: 3
metrics: localhost:http
colour: blue
alerts:
  - webhook: ftp://example.com/secret-token
  - exec: {page: me}
  - pager: x
watches:
  - name: bad name
    logs: []
    stall: soon
    snapshot: yes please
    pid: [one]
    match: "(unclosed"
    extra: 1
  - logs: [a.log]
  - name: twice
    logs: [a.log]
  - name: twice
    logs: [b.log]
""")
    assert found == [
        "F:3: unknown key 'colour' (known: alerts, metrics, state_dir, watches)",
        "F:1: `state_dir` must be a path",
        "F:2: `metrics`: 'localhost:http': expected PORT or HOST:PORT (e.g. 127.0.0.1:9464)",
        "F:5: `webhook` ftp://example.com/<redacted>: the URL must start with http:// or https://",
        "F:6: `exec` takes a command: a list [CMD, ARGS...] or one string",
        "F:7: unknown alert target 'pager' (known: webhook, alertmanager, exec)",
        "F:15: unknown key 'extra' in a watch (known: logs, match, name, native, pid, "
        "report_dir, rules, snapshot, stacks, stall)",
        "F:9: `name` must be letters, digits, `_`, `.` or `-` (at most 64; it names the "
        "watch's state file)",
        "F:10: `logs` must list at least one path or glob",
        "F:11: bad duration in `stall`: not a duration: 'soon' (use e.g. 90, 90s, 10m, 1h)",
        "F:12: `snapshot` must be true or false, not 'yes please'",
        "F:13: `pid` must be a list of process ids",
        "F:14: bad regex in `match`: missing ): '(unclosed'",
        "F:16: missing required key 'name' in a watch",
        "F:19: duplicate watch name 'twice' (first at line 17)",
    ]


def test_yaml_syntax_errors_and_an_empty_config_are_named(tmp_path):
    [syntax] = errors(tmp_path, "watches:\n  - name: [a\n")
    assert syntax.startswith("F:3: invalid YAML: ")
    assert errors(tmp_path, "state_dir: x\n") == [
        "F:1: `watches` must be a list of at least one watch (`- name: ...`, `logs: [...]`)"]


def test_alert_targets_print_without_their_tokens_and_exec_splits_like_a_shell(tmp_path):
    config = load_service_config(write(tmp_path, """\
alerts:
  - webhook: https://user:pw@h.example:8443/x?token=1
  - exec: "page --team 'ml ops'"
watches: [{name: a, logs: [a.log]}]
"""), env={})
    webhook, page = config.alerts
    assert webhook.display == "webhook https://h.example:8443/<redacted>"
    assert page.argv == ("page", "--team", "ml ops")


def test_metrics_takes_a_port_alone_for_loopback_and_ipv6_in_brackets(tmp_path):
    def metrics(value: str) -> MetricsConfig | None:
        text = f"metrics: {value}\nwatches: [{{name: a, logs: [a.log]}}]\n"
        return load_service_config(write(tmp_path, text), env={}).metrics

    assert metrics("9464") == MetricsConfig("127.0.0.1", 9464)
    assert metrics("'[::1]:9464'") == MetricsConfig("::1", 9464)
    assert str(MetricsConfig("::1", 9464)) == "[::1]:9464"
    assert errors(tmp_path, "metrics: 127.0.0.1:99999\nwatches: [{name: a, logs: [a]}]\n") == [
        "F:1: `metrics`: '127.0.0.1:99999': expected PORT or HOST:PORT (e.g. 127.0.0.1:9464)"]


def test_check_config_validates_rules_too_and_exits_2_naming_the_place(tmp_path):
    (tmp_path / "rules.yaml").write_text("pack: mine\nphases:\n  - id: x\n    start: '('\n")
    path = write(tmp_path, "alerts:\n  - webhook: https://h.example/T0/SECRET\nwatches:\n"
                           "  - name: a\n    logs: [a.log]\n    rules: [rules.yaml]\n")
    out, err = io.StringIO(), io.StringIO()
    assert main(["serve", "--check-config", str(path)], out, err) == 2
    assert f"{tmp_path / 'rules.yaml'}:4: rule x: bad regex in `start`" in err.getvalue()

    (tmp_path / "rules.yaml").write_text("pack: mine\n")
    out, err = io.StringIO(), io.StringIO()
    assert main(["serve", "--check-config", str(path)], out, err) == 0, err.getvalue()
    assert "alert: webhook https://h.example/<redacted>" in out.getvalue()
    assert "SECRET" not in out.getvalue() + err.getvalue()


def test_serve_needs_a_config_or_logs_and_not_both(tmp_path):
    err = io.StringIO()
    assert main(["serve"], io.StringIO(), err) == 2
    assert "give --config FILE" in err.getvalue()
    assert main(["serve", "--config", "x.yaml", "a.log"], io.StringIO(), io.StringIO()) == 2
