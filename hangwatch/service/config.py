"""serve's configuration file: validated like rule packs, every problem named with its line.

The key names are a contract with users' files:

    state_dir: /var/lib/hangwatch/state
    metrics: 127.0.0.1:9464
    alerts:
      - webhook: https://hooks.example.com/T000/B000/XXXX
      - alertmanager: http://alertmanager:9093
      - exec: [/usr/local/bin/page-oncall, --team, ml]
    watches:
      - name: gkd-7b
        logs: ["/data/runs/gkd-7b/logs/rank*.log"]
        stall: 10m
        rules: [/etc/hangwatch/rules]
        report_dir: /var/lib/hangwatch/gkd-7b
        snapshot: true
        pid: []
        match: null

Relative paths are taken from the config file's folder. `alerts` is parsed by the alerts
package's own parser (the one `alert-test --config` uses too); `metrics` takes what
`--metrics` takes (`PORT` alone listens on loopback).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import regex

from hangwatch.alerts.settings import parse_alert_targets
from hangwatch.alerts.targets import TargetSpec
from hangwatch.core.durations import parse_duration
from hangwatch.errors import ConfigError, ConfigErrors
from hangwatch.metrics.listen import format_listen, parse_listen
from hangwatch.storage.yamlfile import YamlMapping, parse_yaml

TOP_KEYS = ("state_dir", "metrics", "alerts", "watches")
WATCH_REQUIRED = ("name", "logs")
WATCH_OPTIONAL = ("stall", "rules", "report_dir", "snapshot", "stacks", "native", "pid", "match")
DEFAULT_STALL = "10m"
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # it names files in state_dir


@dataclass(frozen=True)
class MetricsConfig:
    host: str
    port: int

    def __str__(self) -> str:
        return format_listen(self.host, self.port)


@dataclass(frozen=True)
class WatchConfig:
    """One job: its logs (paths or globs), and how to judge and report them."""

    name: str
    logs: tuple[str, ...]
    stall: float
    rules: tuple[Path, ...]
    report_dir: Path
    snapshot: bool = True
    stacks: bool = True
    native: bool = False
    pid: tuple[int, ...] = ()
    match: str | None = None
    stall_given: bool = False  # `stall` was written: it outranks the packs' stall_after


@dataclass(frozen=True)
class ServiceConfig:
    file: str  # where it was read from ("" when built from command-line flags)
    state_dir: Path | None
    watches: tuple[WatchConfig, ...]
    metrics: MetricsConfig | None = None
    alerts: tuple[TargetSpec, ...] = ()


def load_service_config(path: Path, env: Mapping[str, str] = os.environ) -> ServiceConfig:
    """Read and validate; raise ConfigErrors listing every problem, each as file:line."""
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigErrors([ConfigError(f"cannot read: {exc}", file=name)]) from None
    return parse_service_config(text, name, base=path.resolve().parent, env=env)


def parse_service_config(text: str, name: str, *, base: Path,
                         env: Mapping[str, str] = os.environ) -> ServiceConfig:
    errors: list[ConfigError] = []
    config = _Parser(name, base, errors).parse(parse_yaml(text, name), env)
    if errors or config is None:
        raise ConfigErrors(errors)
    return config


class _Parser:
    def __init__(self, file: str, base: Path, errors: list[ConfigError]) -> None:
        self.file = file
        self.base = base
        self.errors = errors

    def error(self, message: str, line: int) -> None:
        self.errors.append(ConfigError(message, file=self.file, line=line))

    def parse(self, doc: Any, env: Mapping[str, str]) -> ServiceConfig | None:
        if not isinstance(doc, YamlMapping):
            self.error("a serve config is a mapping with at least a `watches` list", 1)
            return None
        self._known_keys(doc, TOP_KEYS, "")
        state_dir = self._path(doc, "state_dir")
        if state_dir is None and env.get("STATE_DIRECTORY"):
            # systemd's StateDirectory= (the first one, when there are several)
            state_dir = Path(env["STATE_DIRECTORY"].split(":")[0])
        metrics = self._metrics(doc)
        alerts = self._alerts(doc)
        watches = self._watches(doc, state_dir)
        return ServiceConfig(self.file, state_dir, tuple(watches), metrics, tuple(alerts))

    # --- sections ------------------------------------------------------------------------

    def _metrics(self, doc: YamlMapping) -> MetricsConfig | None:
        value = doc.get("metrics")
        if value is None:
            return None
        try:
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise ValueError(f"expected PORT or HOST:PORT, not {value!r}")
            return MetricsConfig(*parse_listen(str(value)))
        except ValueError as exc:
            self.error(f"`metrics`: {exc}", doc.key_lines["metrics"])
            return None

    def _alerts(self, doc: YamlMapping) -> list[TargetSpec]:
        try:
            return parse_alert_targets(doc.get("alerts"), file=self.file,
                                       line=doc.key_lines.get("alerts", doc.line))
        except ConfigErrors as exc:
            self.errors.extend(exc.errors)
            return []

    def _watches(self, doc: YamlMapping, state_dir: Path | None) -> list[WatchConfig]:
        items = doc.get("watches")
        line = doc.key_lines.get("watches", doc.line)
        if not isinstance(items, list) or not items:
            self.error("`watches` must be a list of at least one watch (`- name: ...`, "
                       "`logs: [...]`)", line)
            return []
        watches: list[WatchConfig] = []
        seen: dict[str, int] = {}
        for item in items:
            if not isinstance(item, YamlMapping):
                self.error("each entry of `watches` must be a mapping with `name` and `logs`",
                           line)
                continue
            watch = self._watch(item, state_dir)
            if watch is None:
                continue
            if watch.name in seen:
                self.error(f"duplicate watch name {watch.name!r} (first at line "
                           f"{seen[watch.name]})", item.key_lines["name"])
                continue
            seen[watch.name] = item.key_lines["name"]
            watches.append(watch)
        return watches

    def _watch(self, item: YamlMapping, state_dir: Path | None) -> WatchConfig | None:
        before = len(self.errors)
        self._known_keys(item, WATCH_REQUIRED + WATCH_OPTIONAL, "in a watch ")
        for key in WATCH_REQUIRED:
            if key not in item:
                self.error(f"missing required key {key!r} in a watch", item.line)
        name = item.get("name")
        if "name" in item and not (isinstance(name, str) and NAME_PATTERN.fullmatch(name)):
            self.error("`name` must be letters, digits, `_`, `.` or `-` (at most 64; it names "
                       "the watch's state file)", item.key_lines["name"])
        logs = self._texts(item, "logs")
        if "logs" in item and not logs:
            self.error("`logs` must list at least one path or glob", item.key_lines["logs"])
        stall = parse_duration(DEFAULT_STALL)
        if "stall" in item:
            try:
                stall = parse_duration(item["stall"])
            except ValueError as exc:
                self.error(f"bad duration in `stall`: {exc}", item.key_lines["stall"])
        rules = tuple(self._resolve(p) for p in self._texts(item, "rules"))
        report_dir = self._path(item, "report_dir")
        flags = {key: self._bool(item, key, default)
                 for key, default in (("snapshot", True), ("stacks", True), ("native", False))}
        pid = self._pids(item)
        match = self._match(item)
        if len(self.errors) > before or not isinstance(name, str):
            return None
        if report_dir is None:
            report_dir = (state_dir / "reports" / name if state_dir is not None
                          else Path("hangwatch-reports") / name)
        return WatchConfig(name=name, logs=tuple(str(self._resolve(p)) for p in logs),
                           stall=stall, rules=rules, report_dir=report_dir, pid=pid,
                           match=match, stall_given="stall" in item, **flags)

    # --- values --------------------------------------------------------------------------

    def _known_keys(self, doc: YamlMapping, known: tuple[str, ...], where: str) -> None:
        for key in doc:
            if key not in known:
                self.error(f"unknown key {key!r} {where}(known: {', '.join(sorted(known))})",
                           doc.key_lines[str(key)])

    def _resolve(self, text: str) -> Path:
        path = Path(text).expanduser()
        return path if path.is_absolute() else self.base / path

    def _path(self, doc: YamlMapping, key: str) -> Path | None:
        value = doc.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            self.error(f"`{key}` must be a path", doc.key_lines[key])
            return None
        return self._resolve(value)

    def _texts(self, doc: YamlMapping, key: str) -> list[str]:
        value = doc.get(key)
        if value is None:
            return []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.error(f"`{key}` must be a list of paths", doc.key_lines[key])
            return []
        return list(value)

    def _bool(self, doc: YamlMapping, key: str, default: bool) -> bool:
        value = doc.get(key, default)
        if not isinstance(value, bool):
            self.error(f"`{key}` must be true or false, not {value!r}", doc.key_lines[key])
            return default
        return value

    def _pids(self, doc: YamlMapping) -> tuple[int, ...]:
        value = doc.get("pid")
        if value is None:
            return ()
        values = value if isinstance(value, list) else [value]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
            self.error("`pid` must be a list of process ids", doc.key_lines["pid"])
            return ()
        return tuple(values)

    def _match(self, doc: YamlMapping) -> str | None:
        value = doc.get("match")
        if value is None:
            return None
        line = doc.key_lines["match"]
        if not isinstance(value, str) or not value:
            self.error("`match` must be a regular expression or null", line)
            return None
        try:
            regex.compile(value)
        except regex.error as exc:
            self.error(f"bad regex in `match`: {exc.msg}: {value!r}", line)
            return None
        return value

