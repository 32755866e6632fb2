"""The `alerts:` key of the service config: a list of `- webhook: URL`, `- alertmanager: URL`
and `- exec: [argv...]` (or `exec: "CMD ARGS"`, split like a shell would, run without one).

This is the one parser of that key: `serve`'s config loader calls `parse_alert_targets` with
the node it read (mappings that know their lines), and `alert-test --config` reads the file
through `load_alert_targets`, so both report `file:line: ...`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hangwatch.alerts.targets import TargetSpec, check_url, split_command
from hangwatch.errors import ConfigError, ConfigErrors
from hangwatch.escape.redact import redact_url

KINDS = ("webhook", "alertmanager", "exec")


def parse_alert_targets(node: Any, *, file: str, line: int) -> list[TargetSpec]:
    """`node` is the value of `alerts:` (None: no alerts); `line` is where the key is.
    Raises ConfigErrors naming every problem."""
    if node is None:
        return []
    errors: list[ConfigError] = []
    if not isinstance(node, list):
        raise ConfigErrors([ConfigError(
            "`alerts` must be a list of `- webhook: URL`, `- alertmanager: URL` or "
            "`- exec: [CMD, ARGS...]`", file=file, line=line)])
    specs = []
    for item in node:
        spec = _target(item, file, getattr(item, "line", line), errors)
        if spec is not None:
            specs.append(spec)
    if errors:
        raise ConfigErrors(errors)
    return specs


def _target(item: Any, file: str, line: int, errors: list[ConfigError]) -> TargetSpec | None:
    def error(message: str) -> None:
        errors.append(ConfigError(message, file=file, line=line))

    if not isinstance(item, dict) or len(item) != 1:
        error("each alert target is one of `webhook: URL`, `alertmanager: URL`, "
              "`exec: [CMD, ARGS...]`")
        return None
    kind, value = next(iter(item.items()))
    line = getattr(item, "key_lines", {}).get(str(kind), line)
    if kind not in KINDS:
        error(f"unknown alert target {kind!r} (known: {', '.join(KINDS)})")
        return None
    if kind == "exec":
        return _exec(value, error)
    if not isinstance(value, str):
        error(f"`{kind}` takes an http:// or https:// URL, not {value!r}")
        return None
    problem = check_url(value)
    if problem:
        error(f"`{kind}` {redact_url(value)}: {problem}")
        return None
    return TargetSpec(kind, url=value)


def _exec(value: Any, error: Callable[[str], None]) -> TargetSpec | None:
    if isinstance(value, str):
        try:
            argv = split_command(value)
        except ValueError as exc:
            error(f"`exec`: {exc}")
            return None
    elif isinstance(value, list) and all(isinstance(a, str) and a for a in value):
        argv = tuple(value)
    else:
        error("`exec` takes a command: a list [CMD, ARGS...] or one string")
        return None
    if not argv:
        error("`exec` has an empty command")
        return None
    return TargetSpec("exec", argv=argv)


def load_alert_targets(path: Path) -> list[TargetSpec]:
    """Only the `alerts:` key of a service config file; the rest is `serve`'s to check."""
    from hangwatch.storage.yamlfile import parse_yaml

    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigErrors([ConfigError(f"cannot read: {exc}", file=name)]) from None
    doc = parse_yaml(text, name)
    if not isinstance(doc, dict):
        raise ConfigErrors([ConfigError("the config must be a mapping", file=name, line=1)])
    if "alerts" not in doc:
        raise ConfigErrors([ConfigError("no `alerts:` key", file=name, line=1)])
    line = getattr(doc, "key_lines", {}).get("alerts", 1)
    specs = parse_alert_targets(doc["alerts"], file=name, line=line)
    if not specs:
        raise ConfigErrors([ConfigError("`alerts` lists no target", file=name, line=line)])
    return specs
